/* SPDX-License-Identifier: MIT */
/* estimate_ext.h - estimates for real-world setups on top of gm_estimate_run():
 * LoRA / QLoRA fine-tuning, data/tensor parallelism with ZeRO or FSDP sharding and CPU
 * offload, DeepSpeed's own model-state estimator (reproduced exactly), serving engines
 * (HF generate, vLLM, llama.cpp), and the search for the largest batch or context that
 * fits a GPU.  Formulas and sources: docs/estimate-advanced.md.
 *
 * All figures of a struct gm_estimate produced here are per device (per GPU); what lives
 * on the host (offloaded optimizer state) is reported separately. */
#ifndef GPUMEM_ESTIMATE_EXT_H
#define GPUMEM_ESTIMATE_EXT_H

#include "gpumem/error.h"
#include "gpumem/estimate.h"
#include "gpumem/model.h"

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- DeepSpeed's estimators (deepspeed.runtime.zero stage_1_and_2 / stage3) ---- */

struct gm_deepspeed_row {
    bool offload_optimizer; /* cpu_offload / offload_optimizer=cpu */
    bool offload_params;    /* ZeRO-3 cpu_offload_params / offload_param=cpu */
    bool zero_init;         /* ZeRO-3 zero.Init */
    uint64_t cpu_bytes;     /* per CPU (node), as DeepSpeed computes it */
    uint64_t gpu_bytes;     /* per GPU */
};

struct gm_deepspeed {
    int stage;                     /* 2 or 3 */
    uint64_t total_params;         /* shared parameters once */
    uint64_t largest_layer_params; /* ZeRO-3: parameters of the largest module */
    uint64_t gpus_per_node;
    uint64_t nodes;
    double buffer_factor; /* additional_buffer_factor, 1.5 */
    size_t n_rows;
    struct gm_deepspeed_row rows[6]; /* in the order DeepSpeed's *_all_cold prints them */
};

/* Reproduce estimate_zero2/zero3_model_states_mem_needs_all_cold(): the same formulas, the
 * same float arithmetic and integer truncations, so that the printed figures match to the
 * last digit.  GM_ERR_INVALID for a stage other than 2/3 or zero GPUs/nodes. */
enum gm_status gm_deepspeed_estimate(int stage, uint64_t total_params,
                                     uint64_t largest_layer_params, uint64_t gpus_per_node,
                                     uint64_t nodes, double buffer_factor, struct gm_deepspeed *out,
                                     struct gm_error *err);

/* The ZeRO paper's per-GPU model states (Rajbhandari et al. 2020, Fig. 1 / Table 1):
 * mixed-precision Adam with K = 12 bytes of optimizer state per parameter, N_d
 * data-parallel ranks: baseline (4 + K)P, P_os 4P + KP/N_d, P_os+g 2P + (2 + K)P/N_d,
 * P_os+g+p (4 + K)P/N_d.  out[0..3] in that order, bytes (rounded down). */
void gm_zero_paper_model_states(uint64_t params, uint64_t n_d, unsigned k, uint64_t out[4]);

/* ---- the extended estimate ---- */

enum gm_lora_kind {
    GM_LORA_NONE = 0,
    GM_LORA_LORA, /* frozen base in the compute dtype, trainable low-rank adapters */
    GM_LORA_QLORA /* frozen base in NF4 (bitsandbytes), adapters in bf16 compute */
};

/* Linear layers an adapter can target (PEFT's names). */
enum gm_lora_target {
    GM_LORA_Q = 1 << 0,
    GM_LORA_K = 1 << 1,
    GM_LORA_V = 1 << 2,
    GM_LORA_O = 1 << 3,
    GM_LORA_GATE = 1 << 4,
    GM_LORA_UP = 1 << 5,
    GM_LORA_DOWN = 1 << 6
};
#define GM_LORA_ATTENTION  (GM_LORA_Q | GM_LORA_K | GM_LORA_V | GM_LORA_O)
#define GM_LORA_ALL_LINEAR (GM_LORA_ATTENTION | GM_LORA_GATE | GM_LORA_UP | GM_LORA_DOWN)

enum gm_shard {
    GM_SHARD_NONE = 0, /* plain data parallel (DDP) when gpus > 1 */
    GM_SHARD_ZERO1,    /* optimizer state (and fp32 master) partitioned */
    GM_SHARD_ZERO2,    /* + gradients */
    GM_SHARD_ZERO3,    /* + parameters, gathered layer by layer */
    GM_SHARD_FSDP      /* PyTorch FSDP FULL_SHARD: like ZeRO-3, unit = one decoder layer */
};

enum gm_engine {
    GM_ENGINE_NONE = 0, /* the base inference estimate */
    GM_ENGINE_HF,       /* transformers generate() */
    GM_ENGINE_VLLM,
    GM_ENGINE_LLAMACPP
};

enum gm_search {
    GM_SEARCH_NONE = 0,
    GM_SEARCH_BATCH,  /* largest --batch that fits */
    GM_SEARCH_CONTEXT /* largest sequence / context length that fits */
};

struct gm_estimate_ext {
    /* LoRA / QLoRA */
    enum gm_lora_kind lora;
    uint64_t lora_rank;      /* r, default 16 */
    unsigned lora_targets;   /* enum gm_lora_target flags, default GM_LORA_ATTENTION */
    bool qlora_double_quant; /* quantise the quantisation constants too (default true) */
    uint64_t qlora_block;    /* NF4 block size, 64 */
    double lora_dropout;     /* PEFT lora_dropout; > 0 keeps a dropped-out input copy */
    bool qlora_fp32_rest;    /* PEFT prepare_model_for_kbit_training: the parameters that
                                are not NF4 are upcast to fp32 (default true) */

    /* parallelism */
    uint64_t gpus;          /* total GPUs, 1 */
    uint64_t gpus_per_node; /* 0: min(gpus, 8) */
    enum gm_shard shard;
    bool offload_optimizer;   /* optimizer state + fp32 master weights on the CPU */
    bool offload_params;      /* ZeRO-3 / FSDP parameters on the CPU */
    uint64_t tp;              /* tensor-parallel degree, 1 */
    uint64_t pp;              /* pipeline stages (training, 1F1B schedule), 1 */
    bool sequence_parallel;   /* Megatron sequence parallelism (with tp > 1) */
    uint64_t bucket_elements; /* ZeRO reduce/all-gather bucket, elements (5e8 DeepSpeed) */
    bool ddp_bucket_view;     /* DDP gradient_as_bucket_view=True (no bucket copy) */

    /* training extras */
    uint64_t grad_accum;  /* micro-batches per optimizer step, 1 */
    bool selective_ckpt;  /* Korthikanti selective recompute: attention scores */
    bool paged_optimizer; /* bitsandbytes paged optimizer (state may page to CPU) */

    /* serving */
    enum gm_engine engine;
    double gpu_memory_utilization;   /* vLLM, 0.9 */
    uint64_t max_model_len;          /* vLLM, 0: the model's max positions (or --context) */
    uint64_t block_size;             /* vLLM KV block, tokens (16) */
    uint64_t max_num_seqs;           /* vLLM, 256 */
    uint64_t max_num_batched_tokens; /* vLLM profile run, 0: 8192 */
    bool enforce_eager;              /* vLLM: no CUDA graphs */
    uint64_t cuda_graph_bytes;       /* vLLM CUDA-graph pool when not eager (512 MiB) */
    uint64_t non_torch_bytes;        /* vLLM non-torch memory; 0: default by TP */
    uint32_t kv_ggml_type;           /* llama.cpp KV type (ggml type id: 1 = f16, 8 = q8_0) */
    uint64_t n_ubatch;               /* llama.cpp physical batch, 512 */
    bool flash_attn;                 /* llama.cpp -fa: no materialised KQ */
    uint64_t gguf_weight_bytes;      /* llama.cpp: bytes of the GGUF weights, 0: from model */
    uint64_t gguf_input_bytes;       /* llama.cpp: token_embd bytes, kept in host memory */

    /* search */
    enum gm_search search;
    uint64_t search_limit; /* upper bound of the search (default 1<<20) */
};

#define GM_EXT_MAX_DEVICE_GROUPS 4

/* Devices that get the same figures ("ranks 0-7", or one pipeline stage). */
struct gm_device_group {
    char role[24]; /* "all", "first stage", "middle stages", "last stage" */
    uint64_t first_rank;
    uint64_t count;
    uint64_t layers; /* decoder layers held (pipeline), 0 = all */
    uint64_t allocated_bytes;
    uint64_t reserved_bytes;
    uint64_t device_bytes;
};

struct gm_estimate_ext_result {
    /* LoRA */
    uint64_t lora_params; /* trainable adapter parameters */
    uint64_t frozen_params;
    uint64_t base_weight_bytes;  /* frozen base weights on one device */
    uint64_t nf4_constant_bytes; /* QLoRA quantisation constants */
    /* parallelism */
    uint64_t gpus;
    uint64_t gpus_per_node;
    uint64_t nodes;
    uint64_t cpu_bytes_per_node; /* offloaded state held by one node's host memory */
    size_t n_groups;
    struct gm_device_group groups[GM_EXT_MAX_DEVICE_GROUPS];
    /* serving */
    uint64_t budget_bytes; /* vLLM: total * gpu_memory_utilization */
    uint64_t non_torch_bytes;
    uint64_t activation_peak_bytes;
    uint64_t kv_bytes_per_token; /* all layers, one device */
    uint64_t kv_pool_bytes;
    uint64_t kv_blocks;
    uint64_t kv_tokens;
    uint64_t max_model_len;
    double max_concurrency;        /* kv_tokens / max_model_len */
    uint64_t compute_buffer_bytes; /* llama.cpp */
    /* paged optimizer */
    uint64_t pageable_bytes; /* optimizer state that may page out to host memory */
    /* search */
    uint64_t search_value; /* largest batch / context that fits, 0 = none */
    bool search_hit_limit; /* the limit fits: the answer may be larger */
    uint64_t search_limit; /* the limit used (the model's positions for a context) */
};

/* Defaults as documented above. */
void gm_estimate_ext_init(struct gm_estimate_ext *x);

/* Run the base estimate of 'in' and apply 'x': the result in 'out' is the per-device
 * estimate (components, phases, three figures, assumptions) and 'res' the extra figures.
 * GM_ERR_INVALID for inconsistent options (e.g. --tp not dividing the heads, ZeRO with one
 * GPU is allowed), or the base estimator's errors. */
enum gm_status gm_estimate_ext_run(const struct gm_estimate_inputs *in,
                                   const struct gm_estimate_ext *x, struct gm_estimate *out,
                                   struct gm_estimate_ext_result *res, struct gm_error *err);

/* With x->search set and in->gpu_memory_bytes > 0: the largest batch (or context / seq)
 * whose device figure fits, by bisection over gm_estimate_ext_run(); res->search_value is
 * 0 when even 1 does not fit.  'out' holds the estimate at the value found (or at 1). */
enum gm_status gm_estimate_ext_search(const struct gm_estimate_inputs *in,
                                      const struct gm_estimate_ext *x, struct gm_estimate *out,
                                      struct gm_estimate_ext_result *res, struct gm_error *err);

/* LoRA adapter parameters of 'm' for rank r and targets (enum gm_lora_target flags):
 * r * (in + out) per targeted linear layer per decoder layer (per expert for MoE MLPs). */
uint64_t gm_lora_params(const struct gm_model *m, uint64_t rank, unsigned targets);

/* Parse "q,k,v,o", "q_proj,v_proj", "attention", "mlp", "all-linear" into target flags. */
enum gm_status gm_lora_targets_parse(const char *s, unsigned *out, struct gm_error *err);

/* Bytes of 'n' NF4 weights in blocks of 'block' with fp32 absmax constants, or with
 * double quantisation (8-bit absmax, one fp32 constant per 256 blocks). */
uint64_t gm_nf4_bytes(uint64_t n, uint64_t block, bool double_quant);

/* KV bytes per token for llama.cpp's cache type (ggml type id), all layers. */
enum gm_status gm_llamacpp_kv_bytes(const struct gm_model *m, uint32_t ggml_type, uint64_t tokens,
                                    uint64_t *bytes, struct gm_error *err);

const char *gm_shard_name(enum gm_shard s);
const char *gm_engine_name(enum gm_engine e);

#ifdef __cplusplus
}
#endif
#endif
