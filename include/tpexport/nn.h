/*
 * nn.h - a layer library on the export op API (export.h): modules with
 * PyTorch's parameter names, shapes, default initialisation and forward
 * semantics, usable eagerly (tp_module_run) and under tp_export.
 *
 * Initialisation follows torch.nn's defaults - kaiming_uniform(a=sqrt(5))
 * weights (bound 1/sqrt(fan_in)) and uniform(-1/sqrt(fan_in), 1/sqrt(fan_in))
 * biases for Linear and Conv*, xavier_uniform in_proj weights and zero
 * biases for MultiheadAttention, ones/zeros for norms, normal(0, 1) for
 * Embedding - drawn from tp_rng, a seeded generator of ours (splitmix64 +
 * Box-Muller): the distributions match PyTorch, the values do not (load a
 * PyTorch state dict with tp_module_load_state_dict for equal values).
 *
 * Every constructor returns a new module the caller owns (tp_module_free,
 * or hand it to a parent with tp_module_add_child / tp_nn_sequential_add).
 * Modules start in training mode, as in PyTorch; use tp_module_train(m,
 * false) for evaluation. Forward arguments are named "input" (one tensor)
 * unless stated.
 */
#ifndef TPEXPORT_NN_H
#define TPEXPORT_NN_H

#include <stdbool.h>
#include <stdint.h>

#include "export.h"
#include "module.h"
#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- random numbers ----------------------------------------------------- */
typedef struct tp_rng {
    uint64_t state;
} tp_rng;
TP_API void tp_rng_seed(tp_rng *rng, uint64_t seed);
TP_API double tp_rng_uniform(tp_rng *rng, double lo, double hi); /* [lo, hi) */
TP_API double tp_rng_normal(tp_rng *rng, double mean, double std);
/* Fill a float tensor. */
TP_API tp_status tp_rng_fill_uniform(tp_rng *rng, tp_tensor *t, double lo, double hi);
TP_API tp_status tp_rng_fill_normal(tp_rng *rng, tp_tensor *t, double mean, double std);

/* ---- layers --------------------------------------------------------------- */

/* Linear(in, out, bias): weight [out, in], bias [out]. */
TP_API tp_status tp_nn_linear(tp_rng *rng, int64_t in_features, int64_t out_features, bool bias, tp_module **out);

/* Conv{1,2,3}d: n_spatial = 1, 2 or 3; kernel/stride/padding/dilation have
 * n_spatial entries (NULL: kernel required; stride 1, padding 0, dilation
 * 1). weight [out, in/groups, *kernel]. */
typedef struct tp_conv_config {
    int n_spatial;
    int64_t in_channels, out_channels;
    int64_t kernel[3], stride[3], padding[3], dilation[3], output_padding[3];
    int64_t groups;
    bool bias;
} tp_conv_config;
/* A config with PyTorch's defaults (stride 1, padding 0, dilation 1, groups 1,
 * bias) and a cubic kernel of size k. */
TP_API tp_conv_config tp_conv_defaults(int n_spatial, int64_t in_channels, int64_t out_channels, int64_t k);
TP_API tp_status tp_nn_conv(tp_rng *rng, const tp_conv_config *cfg, tp_module **out);
/* ConvTranspose2d: weight [in, out/groups, kh, kw]; uses output_padding. */
TP_API tp_status tp_nn_conv_transpose2d(tp_rng *rng, const tp_conv_config *cfg, tp_module **out);

/* BatchNorm1d/2d (one implementation: the channel dim is 1): weight, bias,
 * running_mean, running_var, num_batches_tracked (int64, 0-d). In training
 * mode normalises with batch statistics and updates the running statistics
 * (unbiased variance) with `momentum`, and counts batches. */
TP_API tp_status tp_nn_batch_norm(int64_t num_features, double eps, double momentum, bool affine,
                                  bool track_running_stats, tp_module **out);
/* LayerNorm(normalized_shape, eps, elementwise_affine). */
TP_API tp_status tp_nn_layer_norm(int n, const int64_t *normalized_shape, double eps, bool affine, tp_module **out);
/* GroupNorm(num_groups, num_channels, eps, affine). */
TP_API tp_status tp_nn_group_norm(int64_t num_groups, int64_t num_channels, double eps, bool affine, tp_module **out);
/* Embedding(num, dim, padding_idx (-1: none)); forward argument "input"
 * (int64 indices). */
TP_API tp_status tp_nn_embedding(tp_rng *rng, int64_t num_embeddings, int64_t embedding_dim, int64_t padding_idx,
                                 tp_module **out);
/* Dropout(p): identity in evaluation mode. */
TP_API tp_status tp_nn_dropout(double p, tp_module **out);

typedef enum tp_activation { TP_ACT_RELU, TP_ACT_GELU, TP_ACT_SILU, TP_ACT_TANH, TP_ACT_SIGMOID } tp_activation;
TP_API tp_status tp_nn_activation(tp_activation kind, tp_module **out);

/* MaxPool2d / AvgPool2d(kernel, stride (0: = kernel), padding);
 * AdaptiveAvgPool2d(out_h, out_w); Flatten(start_dim, end_dim). */
TP_API tp_status tp_nn_max_pool2d(int64_t kernel, int64_t stride, int64_t padding, tp_module **out);
TP_API tp_status tp_nn_avg_pool2d(int64_t kernel, int64_t stride, int64_t padding, tp_module **out);
TP_API tp_status tp_nn_adaptive_avg_pool2d(int64_t out_h, int64_t out_w, tp_module **out);
TP_API tp_status tp_nn_flatten(int64_t start_dim, int64_t end_dim, tp_module **out);

/* Sequential: children "0", "1", ... called in order. tp_nn_sequential_add
 * takes ownership of `child` (also on failure). */
TP_API tp_status tp_nn_sequential(tp_module **out);
TP_API tp_status tp_nn_sequential_add(tp_module *seq, tp_module *child);

/* MultiheadAttention(embed_dim, num_heads, bias, batch_first): in_proj_weight
 * [3E, E], in_proj_bias [3E], out_proj (Linear E->E). Forward arguments
 * "query", "key" (default None: query), "value" (default None: key),
 * "key_padding_mask" (None; (N, S) bool or float), "need_weights" (False -
 * PyTorch defaults to True), "attn_mask" (None; (L, S) or (N*H, L, S), bool =
 * not allowed, float = added), "average_attn_weights" (True). Returns the
 * output, or (output, weights) with need_weights (weights (N, L, S) averaged
 * over heads, else (N, H, L, S)). Dropout 0; no is_causal. Heads are split
 * and merged with chunk/stack/cat, so no size is read: batch and sequence
 * may be dynamic. */
TP_API tp_status tp_nn_multihead_attention(tp_rng *rng, int64_t embed_dim, int64_t num_heads, bool bias,
                                           bool batch_first, tp_module **out);
/* TransformerEncoderLayer(d_model, nhead, dim_feedforward, dropout,
 * activation RELU or GELU, layer_norm_eps, batch_first, norm_first):
 * children self_attn, linear1, dropout, linear2, norm1, norm2, dropout1,
 * dropout2 (PyTorch's names). Forward argument "src"; no masks. */
TP_API tp_status tp_nn_transformer_encoder_layer(tp_rng *rng, int64_t d_model, int64_t nhead, int64_t dim_feedforward,
                                                 double dropout, tp_activation activation, double layer_norm_eps,
                                                 bool batch_first, bool norm_first, tp_module **out);
/* torchvision's ResNet BasicBlock(inplanes, planes, stride): conv1 (3x3,
 * stride, no bias), bn1, relu, conv2 (3x3), bn2, and - when stride != 1 or
 * inplanes != planes - downsample = Sequential(conv 1x1 stride, bn). */
TP_API tp_status tp_nn_basic_block(tp_rng *rng, int64_t inplanes, int64_t planes, int64_t stride, tp_module **out);

/* ---- state dicts -------------------------------------------------------------- */

/* Load `n` named tensors (dotted names as in tp_module_named_state's
 * TP_FILTER_STATE_DICT) into m's tensors (values copied, converted to each
 * entry's dtype). strict: every state-dict entry must be given and no other
 * name. All problems are reported at once, PyTorch-style:
 *   Error(s) in loading state_dict for Linear:
 *       Missing key(s) in state_dict: "bias".
 *       Unexpected key(s) in state_dict: "bias2".
 *       size mismatch for weight: copying a param with shape [3, 4] from
 *       checkpoint, the shape in current model is [4, 3].
 * (TP_ERR_NOT_FOUND when only keys are missing/unexpected, TP_ERR_SHAPE when a
 * size mismatches). Nothing is loaded on error. Non-persistent buffers are
 * not part of the state dict. */
TP_API tp_status tp_module_load_state_dict(tp_module *m, const char *const *names, tp_tensor *const *tensors, int n,
                                           bool strict);

#ifdef __cplusplus
}
#endif
#endif
