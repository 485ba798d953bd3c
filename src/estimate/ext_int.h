/* SPDX-License-Identifier: MIT */
/* ext_int.h - pieces of the extended estimate shared by lora.c, sharding.c, serving.c and
 * ext.c (library-internal). */
#ifndef GM_ESTIMATE_EXT_INT_H
#define GM_ESTIMATE_EXT_INT_H

#include "gpumem/estimate_ext.h"
#include "gpumem/units.h"

/* What a base component stands for, so that an extension can rescale or replace it. */
enum ext_role {
    ROLE_WEIGHTS = 0, /* the working copy of the weights */
    ROLE_MASTER,      /* fp32 master weights of mixed precision */
    ROLE_AUTOCAST,    /* 16-bit copies of the weights made by autocast */
    ROLE_GRADS,
    ROLE_OPT_STATE,
    ROLE_OPT_TEMP, /* optimizer-step temporaries */
    ROLE_ACT,      /* activations saved for backward, prefill activations */
    ROLE_LOGITS,   /* logits and loss */
    ROLE_KV,
    ROLE_OTHER
};

enum ext_role ext_component_role(const struct gm_est_component *c);

/* Remove component i (order kept). */
void ext_remove_component(struct gm_estimate *e, size_t i);

/* Bytes per element of the weights, gradients and optimizer moments for a precision. */
unsigned ext_weight_bytes(enum gm_precision p);
unsigned ext_state_bytes(enum gm_precision p);

/* Parameters of the largest linear layer inside a decoder layer, and of one decoder
 * layer (what FSDP wraps as a unit). */
uint64_t ext_largest_linear(const struct gm_model *m);
uint64_t ext_layer_params(const struct gm_model *m, const struct gm_param_counts *pc);

/* Apply LoRA / QLoRA to a training estimate. */
enum gm_status ext_apply_lora(const struct gm_estimate_inputs *in, const struct gm_estimate_ext *x,
                              const struct gm_param_counts *pc, struct gm_estimate *e,
                              struct gm_estimate_ext_result *res, struct gm_error *err);

/* Apply data / tensor parallelism, sharding and offload to a training estimate; may raise
 * in->workspace_bytes by the NCCL buffers. */
enum gm_status ext_apply_parallel(struct gm_estimate_inputs *in, const struct gm_estimate_ext *x,
                                  const struct gm_param_counts *pc, struct gm_estimate *e,
                                  struct gm_estimate_ext_result *res, struct gm_error *err);

/* Pipeline parallelism: split the per-device estimate 'e' into stage groups in 'res' and
 * leave in 'e' the stage with the largest device figure. */
enum gm_status ext_apply_pipeline(const struct gm_estimate_inputs *in,
                                  const struct gm_estimate_ext *x, const struct gm_param_counts *pc,
                                  struct gm_estimate *e, struct gm_estimate_ext_result *res,
                                  struct gm_error *err);

/* Serving engines: replace the inference estimate with the engine's accounting. */
enum gm_status ext_apply_vllm(struct gm_estimate_inputs *in, const struct gm_estimate_ext *x,
                              const struct gm_param_counts *pc, struct gm_estimate *e,
                              struct gm_estimate_ext_result *res, struct gm_error *err);
enum gm_status ext_apply_llamacpp(struct gm_estimate_inputs *in, const struct gm_estimate_ext *x,
                                  const struct gm_param_counts *pc, struct gm_estimate *e,
                                  struct gm_estimate_ext_result *res, struct gm_error *err);

#endif
