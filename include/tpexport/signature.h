/*
 * signature.h - the graph signature of an exported program.
 *
 * A signature says what each placeholder of the graph is (input specs, in
 * placeholder order) and what each flattened output is (output specs, in
 * output order): user inputs and outputs, lifted state (parameters, buffers,
 * constant tensors, custom objects), effect tokens, and the mutations the
 * program applies to its state or inputs. Lifted state comes first among
 * placeholders; mutation outputs come first among outputs.
 *
 * Text form (tp_signature_to_string), one spec per line:
 *
 *     # inputs
 *     p_fc1_weight: PARAMETER target='fc1.weight'
 *     b_stats: BUFFER target='stats' persistent=True
 *     x: USER_INPUT
 *
 *     # outputs
 *     add_: BUFFER_MUTATION target='stats'
 *     relu: USER_OUTPUT
 *
 * Ownership: a tp_signature owns copies of every string and value given to
 * it. Specs returned by accessors are borrowed (valid until the signature is
 * changed or freed). Name lists (tp_strings, tp_string_map) are allocated by
 * the library and freed with tp_strings_free / tp_string_map_free; their
 * strings are borrowed from the signature.
 */
#ifndef TPEXPORT_SIGNATURE_H
#define TPEXPORT_SIGNATURE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "status.h"
#include "value.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What kind of value an input or output is. */
typedef enum tp_arg_kind {
    TP_ARGK_TENSOR = 0,
    TP_ARGK_SYM_INT,
    TP_ARGK_SYM_FLOAT,
    TP_ARGK_SYM_BOOL,
    TP_ARGK_TOKEN,
    TP_ARGK_CUSTOM_OBJ, /* class_fqn names the class */
    TP_ARGK_CONSTANT    /* value holds an int, float, bool, str or None */
} tp_arg_kind;

typedef struct tp_arg_spec {
    tp_arg_kind kind;
    const char *name;      /* placeholder / output node name ("" for anonymous constants) */
    const char *class_fqn; /* custom objects only, else NULL */
    tp_value value;        /* constants only, else None */
} tp_arg_spec;

typedef enum tp_input_kind {
    TP_INPUT_USER_INPUT = 0,
    TP_INPUT_PARAMETER,
    TP_INPUT_BUFFER,
    TP_INPUT_CONSTANT_TENSOR,
    TP_INPUT_CUSTOM_OBJ,
    TP_INPUT_TOKEN
} tp_input_kind;

typedef enum tp_output_kind {
    TP_OUTPUT_USER_OUTPUT = 0,
    TP_OUTPUT_LOSS_OUTPUT,
    TP_OUTPUT_BUFFER_MUTATION,
    TP_OUTPUT_PARAMETER_MUTATION,
    TP_OUTPUT_GRADIENT_TO_PARAMETER,
    TP_OUTPUT_GRADIENT_TO_USER_INPUT,
    TP_OUTPUT_USER_INPUT_MUTATION,
    TP_OUTPUT_TOKEN
} tp_output_kind;

/* Persistence of an input spec: only buffers carry one. */
typedef enum tp_persistence { TP_PERSISTENT_UNSET = -1, TP_PERSISTENT_NO = 0, TP_PERSISTENT_YES = 1 } tp_persistence;

typedef struct tp_input_spec {
    tp_input_kind kind;
    tp_arg_spec arg;
    const char *target;        /* state name such as "fc1.weight"; NULL for user inputs and tokens */
    tp_persistence persistent; /* required (not UNSET) for buffers */
} tp_input_spec;

typedef struct tp_output_spec {
    tp_output_kind kind;
    tp_arg_spec arg;
    const char *target; /* mutated state / input, gradient target; else NULL */
} tp_output_spec;

/* Names: "USER_INPUT", "BUFFER_MUTATION", "TENSOR"-style (as in tensorplay). */
TP_API const char *tp_input_kind_name(tp_input_kind kind);
TP_API const char *tp_output_kind_name(tp_output_kind kind);
TP_API const char *tp_arg_kind_name(tp_arg_kind kind);
/* Parse those names back; TP_ERR_INVALID_ARG for unknown ones. */
TP_API tp_status tp_input_kind_from_name(const char *name, tp_input_kind *out);
TP_API tp_status tp_output_kind_from_name(const char *name, tp_output_kind *out);

/* Argument spec constructors (borrow their strings: the signature copies). */
TP_API tp_arg_spec tp_arg_tensor(const char *name);
TP_API tp_arg_spec tp_arg_token(const char *name);
TP_API tp_arg_spec tp_arg_sym_int(const char *name);
TP_API tp_arg_spec tp_arg_custom_obj(const char *name, const char *class_fqn);
/* value is borrowed (copied by the signature). */
TP_API tp_arg_spec tp_arg_constant(const char *name, tp_value value);

typedef struct tp_signature tp_signature;

/* ---- building ---------------------------------------------------------- */
TP_API tp_status tp_signature_new(tp_signature **out);
TP_API void tp_signature_free(tp_signature *sig); /* NULL ok */
/* Append an input spec (copied). Errors: BUFFER without persistence
 * (TP_ERR_INVALID_ARG "buffer input requires a persistence flag"); state
 * kinds (PARAMETER, BUFFER, CONSTANT_TENSOR, CUSTOM_OBJ) without a target;
 * a constant argument whose value is not a scalar. */
TP_API tp_status tp_signature_add_input(tp_signature *sig, tp_input_kind kind, tp_arg_spec arg,
                                        const char *target, tp_persistence persistent);
/* Append an output spec (copied). Mutation and gradient kinds need a target. */
TP_API tp_status tp_signature_add_output(tp_signature *sig, tp_output_kind kind, tp_arg_spec arg,
                                         const char *target);
/* Deep copy: shares nothing with sig. */
TP_API tp_status tp_signature_clone(const tp_signature *sig, tp_signature **out);
/* The compact legacy form: parameters, buffers (non_persistent lists those of
 * `buffers` that are not persistent) and user inputs; each name is both the
 * placeholder name and the target. Produces PARAMETER, then BUFFER, then
 * USER_INPUT specs and no outputs. */
TP_API tp_status tp_signature_from_legacy(const char *const *parameters, int n_parameters,
                                          const char *const *buffers, int n_buffers,
                                          const char *const *non_persistent, int n_non_persistent,
                                          const char *const *user_inputs, int n_user_inputs,
                                          tp_signature **out);

/* ---- access ------------------------------------------------------------ */
TP_API int tp_signature_n_inputs(const tp_signature *sig);
TP_API int tp_signature_n_outputs(const tp_signature *sig);
TP_API const tp_input_spec *tp_signature_input(const tp_signature *sig, int i);   /* NULL if out of range */
TP_API const tp_output_spec *tp_signature_output(const tp_signature *sig, int i); /* NULL if out of range */
/* Index of the input spec whose argument is named `name`, or -1. */
TP_API int tp_signature_find_input(const tp_signature *sig, const char *name);
TP_API int tp_signature_find_output(const tp_signature *sig, const char *name);
/* Number of mutation outputs (buffer, parameter and user-input mutations). */
TP_API int tp_signature_n_mutations(const tp_signature *sig);

/* Rename argument `old_name` to `new_name` in every input and output spec.
 * Returns the number of specs changed through *count (may be NULL). */
TP_API tp_status tp_signature_replace_all_uses(tp_signature *sig, const char *old_name,
                                               const char *new_name, int *count);

/* is_param / is_buffer: is `name` a placeholder carrying a lifted parameter /
 * buffer? */
TP_API bool tp_signature_is_param(const tp_signature *sig, const char *name);
TP_API bool tp_signature_is_buffer(const tp_signature *sig, const char *name);

/* ---- derived views ------------------------------------------------------ */
typedef struct tp_strings {
    int n;
    const char **items; /* borrowed strings */
} tp_strings;

typedef struct tp_string_map {
    int n;
    const char **keys;   /* borrowed */
    const char **values; /* borrowed */
} tp_string_map;

TP_API void tp_strings_free(tp_strings *s);        /* frees the arrays; NULL ok */
TP_API void tp_string_map_free(tp_string_map *m);  /* frees the arrays; NULL ok */
/* Lookup in a map; NULL if absent. */
TP_API const char *tp_string_map_get(const tp_string_map *m, const char *key);

typedef enum tp_signature_view {
    TP_VIEW_USER_INPUTS,            /* names of user-input placeholders */
    TP_VIEW_PARAMETERS,             /* targets */
    TP_VIEW_BUFFERS,                /* targets */
    TP_VIEW_NON_PERSISTENT_BUFFERS, /* targets */
    TP_VIEW_LIFTED_TENSOR_CONSTANTS,/* targets */
    TP_VIEW_LIFTED_CUSTOM_OBJS,     /* targets */
    TP_VIEW_INPUT_TOKENS,           /* names */
    TP_VIEW_OUTPUT_TOKENS,          /* names */
    TP_VIEW_USER_OUTPUTS            /* names of USER_OUTPUT and LOSS_OUTPUT specs */
} tp_signature_view;

typedef enum tp_signature_map {
    TP_MAP_INPUTS_TO_PARAMETERS,    /* placeholder name -> target */
    TP_MAP_INPUTS_TO_BUFFERS,
    TP_MAP_INPUTS_TO_CONSTANTS,
    TP_MAP_BUFFERS_TO_MUTATE,       /* output name -> target */
    TP_MAP_PARAMETERS_TO_MUTATE,
    TP_MAP_USER_INPUTS_TO_MUTATE
} tp_signature_map;

/* A list view, in signature order. For user inputs/outputs that are
 * constants, the item is the constant's name. */
TP_API tp_status tp_signature_view_names(const tp_signature *sig, tp_signature_view view, tp_strings *out);
TP_API tp_status tp_signature_map_names(const tp_signature *sig, tp_signature_map map, tp_string_map *out);

/* Backward signature: present only when there is a LOSS_OUTPUT. *has is set
 * to false (and the maps left empty) otherwise. More than one loss output →
 * TP_ERR_INVALID_ARG "loss output must be one tensor argument". */
typedef struct tp_backward_signature {
    tp_string_map gradients_to_parameters;  /* output name -> parameter target */
    tp_string_map gradients_to_user_inputs; /* output name -> user input name */
    const char *loss_output;                /* borrowed */
} tp_backward_signature;
TP_API tp_status tp_signature_backward(const tp_signature *sig, bool *has, tp_backward_signature *out);
TP_API void tp_backward_signature_free(tp_backward_signature *b);

/* ---- text -------------------------------------------------------------- */
/* The text form shown above, starting with "\n# inputs\n". Caller frees
 * *out with tp_free. */
TP_API tp_status tp_signature_to_string(const tp_signature *sig, char **out);
TP_API tp_status tp_signature_print(const tp_signature *sig, FILE *f);
/* One spec line without newline, e.g. "b_stats: BUFFER target='stats'
 * persistent=True", into buf (truncated to size). */
TP_API void tp_input_spec_str(const tp_input_spec *spec, char *buf, size_t size);
TP_API void tp_output_spec_str(const tp_output_spec *spec, char *buf, size_t size);

#ifdef __cplusplus
}
#endif
#endif
