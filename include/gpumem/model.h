/* SPDX-License-Identifier: MIT */
/* model.h - the architecture of a model, as the memory estimator needs it.
 *
 * A struct gm_model is a plain value (no heap memory, copy it freely).  It is filled from a
 * Hugging Face config.json (gm_model_load_hf_config()), from the built-in catalog
 * (gm_model_catalog_find()), or by other readers (safetensors / GGUF headers) that know
 * the same fields.  gm_model_count_params() derives the exact parameter count from the
 * architecture fields alone (tied embeddings, gated MLPs, grouped-query attention, biases,
 * norms, MoE experts); a reader that has the real tensor shapes may set n_params_file,
 * which then wins.
 *
 * Readers that fill a struct gm_model start from gm_model_init(), which sets every field
 * to "unknown" (0 / false / GM_*_UNKNOWN), so fields added later keep a safe default. */
#ifndef GPUMEM_MODEL_H
#define GPUMEM_MODEL_H

#include "gpumem/env.h"
#include "gpumem/error.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif
#pragma GCC visibility push(default) /* the public API (gpumem.h) */

/* Architecture families whose parameter layout gpumem knows.  Append new values before
 * GM_ARCH__COUNT; never renumber (they appear in JSON only by name). */
enum gm_arch {
    GM_ARCH_UNKNOWN = 0,
    GM_ARCH_LLAMA,    /* llama, and the generic "decoder with gated MLP, no biases" */
    GM_ARCH_MISTRAL,  /* llama layout + sliding window */
    GM_ARCH_MIXTRAL,  /* mistral attention + MoE MLP */
    GM_ARCH_QWEN2,    /* llama layout + q/k/v biases */
    GM_ARCH_GEMMA,    /* llama layout, explicit head_dim, tied, GeGLU */
    GM_ARCH_GEMMA2,   /* gemma + 4 norms per layer + alternating sliding window */
    GM_ARCH_PHI,      /* phi-2: parallel attention/MLP, one LayerNorm, biases everywhere */
    GM_ARCH_PHI3,     /* phi-3: llama layout with fused qkv / gate_up (same counts) */
    GM_ARCH_GPT2,     /* learned positions, fused qkv with bias, LayerNorm, GELU 4h */
    GM_ARCH_GPT_NEOX, /* pythia / gpt-neox: parallel residual, biases, untied embed_out */
    GM_ARCH_BERT,     /* encoder, learned positions + token types, post-LN, pooler */
    GM_ARCH_QWEN3,    /* llama layout + RMSNorm on q and k per head (q_norm, k_norm) */
    /* ---- encoders, encoder-decoders and the other non-Llama layouts ---- */
    GM_ARCH_ROBERTA,     /* BERT layout, one token type, positions offset by the padding index */
    GM_ARCH_XLM_ROBERTA, /* RoBERTa layout with a 250k vocabulary */
    GM_ARCH_DISTILBERT,  /* BERT layout without token types or pooler, 6 layers */
    GM_ARCH_DEBERTA_V2,  /* DeBERTa-v2/v3: relative-position table, no absolute positions */
    GM_ARCH_MODERNBERT,  /* pre-norm encoder, bias-free LayerNorm, fused qkv, GeGLU */
    GM_ARCH_T5,          /* encoder-decoder, relative attention bias, RMS-style norm */
    GM_ARCH_BART,        /* encoder-decoder, learned positions, biases, LayerNorm */
    GM_ARCH_GPT_BIGCODE, /* GPT-2 layout with multi-query attention (StarCoder, SantaCoder) */
    GM_ARCH_FALCON,      /* parallel attention/MLP; multi-query or grouped (new decoder) */
    GM_ARCH_COHERE,      /* parallel block, bias-free LayerNorm, tied (Command-R) */
    GM_ARCH_GEMMA3,      /* gemma-2 layout + q/k norms, 5 local : 1 global layers */
    GM_ARCH_STARCODER2,  /* GQA, biases, LayerNorm, plain GELU MLP, sliding window */
    GM_ARCH_OLMO,        /* llama layout with parameter-free LayerNorm */
    GM_ARCH_OLMO2,       /* post-norms and q/k norms over all heads */
    GM_ARCH_QWEN2_MOE,   /* qwen2 attention, routed experts + a gated shared expert */
    GM_ARCH_QWEN3_MOE,   /* qwen3 attention, routed experts */
    GM_ARCH_DEEPSEEK_V2, /* MLA attention, shared + routed experts, first layers dense */
    GM_ARCH_DEEPSEEK_V3, /* deepseek-v2 layout + router score bias */
    GM_ARCH_GPT_OSS,     /* biased GQA with attention sinks, alternating 128-token windows,
                            routed experts with biases and a biased router (gpt-oss) */
    GM_ARCH_LLAMA4,      /* llama attention, chunked local attention on RoPE layers, routed
                            experts + one shared expert, dense layers of their own width */
    GM_ARCH_QWEN3_NEXT,  /* qwen3-moe MLP (+ gated shared expert); 3 of 4 layers Gated DeltaNet
                            linear attention (a recurrent state, no KV), gated full attention */
    GM_ARCH_JAMBA,       /* Mamba (selective SSM) layers with attention every 8th, MoE MLP every
                            other layer */
    GM_ARCH_NEMOTRON_H,  /* blocks of one mixer each, as hybrid_override_pattern lays them out:
                            Mamba-2, attention or a squared-ReLU MLP, one RMSNorm per block */
    GM_ARCH_FALCON_H1,   /* every layer attention and a Mamba-2 mixer side by side, then a
                            SwiGLU MLP */
    GM_ARCH__COUNT
};

/* Element types of weights, activations and caches.  Append before GM_DTYPE__COUNT. */
enum gm_dtype {
    GM_DTYPE_UNKNOWN = 0,
    GM_DTYPE_F32,
    GM_DTYPE_F16,
    GM_DTYPE_BF16,
    GM_DTYPE_F64,
    GM_DTYPE_F8_E4M3,
    GM_DTYPE_F8_E5M2,
    GM_DTYPE_I64,
    GM_DTYPE_I32,
    GM_DTYPE_I16,
    GM_DTYPE_I8,
    GM_DTYPE_U8,
    GM_DTYPE_BOOL,
    GM_DTYPE_INT4, /* packed 4-bit integers, without quantisation constants */
    GM_DTYPE_NF4,  /* bitsandbytes NF4, without quantisation constants */
    GM_DTYPE__COUNT
};

enum gm_norm {
    GM_NORM_UNKNOWN = 0,
    GM_NORM_RMS,   /* weight only */
    GM_NORM_LAYER, /* weight and bias */
    /* ---- LayerNorm variants ---- */
    GM_NORM_LAYER_NOBIAS, /* LayerNorm with a weight only (cohere, ModernBERT) */
    GM_NORM_PARAMFREE     /* LayerNorm without parameters (OLMo) */
};

/* MLP activation, as implemented by the reference (HF) code: it decides how many
 * intermediate-sized tensors autograd keeps. */
enum gm_act {
    GM_ACT_UNKNOWN = 0,
    GM_ACT_SILU,     /* native op: saves its input */
    GM_ACT_GELU,     /* native erf or tanh GELU: saves its input */
    GM_ACT_GELU_NEW, /* Python tanh formula (gelu_new): keeps 4 intermediate tensors */
    GM_ACT_RELU
};

/* What sits on top of the last layer. */
enum gm_head {
    GM_HEAD_CAUSAL_LM = 0, /* lm_head over the vocabulary (tied or not) */
    GM_HEAD_ENCODER,       /* encoder: last hidden state, pooled output or a classifier */
    GM_HEAD_SEQ2SEQ_LM     /* encoder-decoder with an lm_head over the vocabulary (T5, BART) */
};

/* Roles of parameter tensors, as weight formats treat them. */
enum gm_param_role {
    GM_ROLE_EMBEDDING = 0, /* token, position and token-type tables */
    GM_ROLE_ATTENTION,     /* attention projections in the layers (MLA low-rank ones too) */
    GM_ROLE_MLP,           /* dense MLP and expert projections in the layers */
    GM_ROLE_ROUTER,        /* MoE router and shared-expert gate */
    GM_ROLE_NORM,          /* norm weights and biases */
    GM_ROLE_LM_HEAD,       /* untied output projection over the vocabulary */
    GM_ROLE_OTHER,         /* pooler, classifier, relative-position tables */
    GM_ROLE__COUNT
};

/* Weight formats: how a checkpoint, or a quantiser at load time, stores the weights.  The
 * scheme decides the bytes of each linear layer and which roles stay in 16 bit
 * (docs/estimate.md, "Weight formats", gives each scheme's layout with its source). */
enum gm_quant_method {
    GM_QUANT_NONE = 0, /* plain floats (torch_dtype) */
    GM_QUANT_BNB_INT8, /* bitsandbytes LLM.int8(): int8 weights, one fp32 scale per row */
    GM_QUANT_BNB_NF4,  /* bitsandbytes 4-bit NormalFloat, absmax per block of 64 */
    GM_QUANT_BNB_FP4,  /* bitsandbytes 4-bit float, absmax per block of 64 */
    GM_QUANT_GPTQ,     /* GPTQ: packed int32 qweight, fp16 scales and packed zeros per group,
                          int32 g_idx per input feature */
    GM_QUANT_AWQ,      /* AWQ: packed int32 qweight, fp16 scales (and packed zeros) per group */
    GM_QUANT_FP8,      /* float8 (e4m3) weights with fp32 scales per tensor, row or block */
    GM_QUANT_INT,      /* compressed-tensors pack-quantized ints (W4A16, W8A16): scales per
                          group in the compute dtype */
    GM_QUANT_GGUF,     /* ggml types per tensor, as the GGUF headers say */
    GM_QUANT_MXFP4,    /* OCP MX FP4 (e2m1) weights, one e8m0 byte scale per 32 inputs */
    GM_QUANT_NVFP4,    /* NVIDIA FP4 (e2m1) weights, one fp8 e4m3 scale per 16 inputs and
                          fp32 global weight and input scales per linear */
    GM_QUANT__COUNT
};

/* How finely FP8 (and compressed-tensors) weights are scaled. */
enum gm_quant_scale {
    GM_SCALE_TENSOR = 0, /* one fp32 scale per weight */
    GM_SCALE_CHANNEL,    /* one per output row */
    GM_SCALE_BLOCK,      /* one per block_rows x block_cols block */
    GM_SCALE_GROUP       /* one per group_size input features of a row */
};

struct gm_quant {
    enum gm_quant_method method;
    unsigned bits;       /* GPTQ / AWQ / INT: bits per weight (2, 3, 4, 8) */
    uint64_t group_size; /* GPTQ / AWQ / INT: input features per scale, 0 = whole column */
    bool zeros;          /* packed zero points are stored (GPTQ, AWQ zero_point, asymmetric) */
    bool g_idx;          /* GPTQ: int32 group index of every input feature */
    bool desc_act;       /* GPTQ: act-order (columns quantised by decreasing activation) */
    bool double_quant;   /* bitsandbytes 4-bit: the absmax quantised to 8 bits */
    enum gm_quant_scale scale; /* FP8: scale granularity */
    uint64_t block_rows;       /* FP8 block scales (DeepSeek-V3: 128 x 128) */
    uint64_t block_cols;
    bool input_scale; /* FP8 static activations: one fp32 input scale per linear */
    bool lm_head;     /* the lm_head is quantised too (GPTQ lm_head: true) */
    unsigned keep;    /* roles (1 << enum gm_param_role) kept in 16 bit beyond the
                         scheme's own (modules_to_not_convert, ignore) */
    char unknown[24]; /* a quant_method gpumem does not know ("hqq"), else "" */
};

/* The vision tower of a vision-language model, as the language model sees it. */
enum gm_vision_kind {
    GM_VISION_NONE = 0,
    GM_VISION_CLIP,    /* LLaVA: a CLIP / SigLIP ViT (class token, learned positions, LayerNorm,
                          biased q/k/v/o, fc1/fc2) over a fixed image_size, then a two-layer
                          GELU projector; (image_size / patch)^2 tokens an image */
    GM_VISION_QWEN_VL, /* Qwen2-VL / Qwen2.5-VL: a ViT over native resolution (3-D patch
                          embedding of temporal_patch x patch^2, RMSNorm, fused qkv, SwiGLU MLP
                          in 2.5), then a merger of spatial_merge^2 patches into one token */
};

struct gm_vision {
    enum gm_vision_kind kind;
    uint64_t hidden;       /* vision_config hidden_size (Qwen2-VL: embed_dim) */
    uint64_t layers;       /* num_hidden_layers / depth */
    uint64_t heads;        /* num_attention_heads / num_heads */
    uint64_t intermediate; /* MLP width */
    uint64_t patch;        /* patch_size, pixels */
    uint64_t image_size;   /* CLIP: the fixed input side, pixels */
    uint64_t merge;        /* Qwen-VL: spatial_merge_size */
    uint64_t temporal;     /* Qwen-VL: temporal_patch_size */
    bool gated_mlp;        /* Qwen2.5-VL: SwiGLU (gate, up, down); Qwen2-VL, CLIP: fc1, fc2 */
    bool rms_norm;         /* Qwen2.5-VL: RMSNorm; otherwise LayerNorm with bias */
};

/* The rope_scaling type of a config.json (its "rope_type", or "type" in older configs): how
 * the rotary frequencies are stretched, and so, for an engine, how far the positions reach. */
enum gm_rope_scaling {
    GM_ROPE_NONE = 0, /* no rope_scaling (or rope_type "default") */
    GM_ROPE_LINEAR,   /* "linear": positions divided by factor (deepseek-coder, gemma-3) */
    GM_ROPE_DYNAMIC,  /* "dynamic": NTK-aware, stretched past max_position_embeddings */
    GM_ROPE_YARN,     /* "yarn": original_max_position_embeddings x factor */
    GM_ROPE_LLAMA3,   /* "llama3": max_position_embeddings already the scaled length */
    GM_ROPE_LONGROPE, /* "longrope" / "su" (Phi-3): likewise */
    GM_ROPE_OTHER     /* another type (mrope, ...): its factor, when given, kept */
};

/* How a model's layers combine attention (a KV cache), linear attention (a recurrent state)
 * and the MLP. */
enum gm_layer_mix {
    GM_MIX_ALTERNATE = 0, /* each layer attention or linear attention, then an MLP (Qwen3-Next,
                             Jamba; every plain transformer: no linear layers) */
    GM_MIX_PARALLEL,      /* each layer both, side by side, then an MLP (Falcon-H1) */
    GM_MIX_PATTERN        /* each layer one mixer: attention, linear attention or an MLP
                             (Nemotron-H's hybrid_override_pattern) */
};

#define GM_MODEL_NAME_MAX 64

struct gm_model {
    char name[GM_MODEL_NAME_MAX]; /* catalog name or Hub id; "" when unknown */
    char model_type[32];          /* HF model_type ("llama"); "" when unknown */
    enum gm_arch arch;
    enum gm_head head;
    uint64_t hidden;              /* hidden_size */
    uint64_t n_layers;            /* num_hidden_layers */
    uint64_t n_heads;             /* num_attention_heads (query heads) */
    uint64_t n_kv_heads;          /* num_key_value_heads (== n_heads without GQA) */
    uint64_t head_dim;            /* explicit head_dim, else hidden / n_heads */
    uint64_t intermediate;        /* MLP width (per expert for MoE) */
    uint64_t vocab;               /* vocab_size */
    uint64_t max_positions;       /* max_position_embeddings */
    uint64_t n_positions_learned; /* rows of a learned position table, 0 = rotary */
    uint64_t n_token_types;       /* BERT token-type rows, 0 = none */
    uint64_t sliding_window;      /* tokens, 0 = full attention */
    uint64_t n_sliding_layers;    /* layers that use the window (<= n_layers) */
    uint64_t n_experts;           /* MoE experts per layer, 0 = dense MLP */
    uint64_t n_experts_active;    /* experts per token (top-k), 0 = dense */
    unsigned norms_per_layer;     /* 1 (phi-2), 2 (most), 4 (gemma-2) */
    enum gm_norm norm;
    enum gm_act act;
    bool tied_embeddings;       /* lm_head shares the embedding matrix */
    bool gated_mlp;             /* gate/up/down (3 matrices) instead of up/down */
    bool qkv_bias;              /* biases on q, k and v projections */
    bool out_bias;              /* bias on the attention output projection */
    bool mlp_bias;              /* biases on the MLP projections */
    bool lm_head_bias;          /* bias on the untied lm_head (phi-2) */
    bool final_norm;            /* a norm after the last layer */
    bool use_cache_off;         /* config.json "use_cache": false (transformers' default: true) */
    double attn_dropout;        /* dropout on attention probabilities */
    double hidden_dropout;      /* dropout on residual branches */
    enum gm_dtype dtype;        /* torch_dtype of the published weights */
    uint64_t n_params_file;     /* exact count from tensor headers, 0 = unknown */
    uint64_t weight_bytes_file; /* bytes of the weights in a file, 0 = unknown */
    bool qk_norm;               /* RMSNorm (head_dim weights) on q and k (qwen3) */
    /* ---- rotary position scaling (config.json rope_scaling, as the file gives it) ---- */
    enum gm_rope_scaling rope_scaling; /* its type, GM_ROPE_NONE without one */
    double rope_factor;                /* its factor, 0 when absent */
    uint64_t rope_original_positions;  /* its original_max_position_embeddings, 0 when absent */
    /* ---- encoders and encoder-decoders ---- */
    uint64_t n_decoder_layers; /* encoder-decoder: decoder layers (n_layers: encoder layers) */
    uint64_t rel_attn_buckets; /* T5: relative-position buckets (first layer of each stack) */
    uint64_t rel_pos_rows;     /* DeBERTa-v2: rows of the shared relative-position table */
    uint64_t n_labels;         /* encoder: classifier outputs (ForSequenceClassification), 0 */
    bool pooler;               /* encoder: pooler dense h x h (BertModel, RobertaModel, ...) */
    bool cls_dense;            /* classifier: a dense h x h before the output (RoBERTa) */
    bool emb_norm;             /* a norm after the embeddings (each stack of a seq2seq) */
    bool no_first_attn_norm;   /* ModernBERT: layer 0 has no attention norm */
    bool qk_norm_full;         /* q/k norms over all heads' widths (olmo2, cohere), not head_dim */
    bool post_norms;           /* olmo2: norms after attention and MLP instead of before */
    double attn_softcap;       /* attention logit soft-capping (gemma-2), 0 = none */
    double final_softcap;      /* final logit soft-capping (gemma-2), 0 = none */
    uint64_t head_dim_v;       /* value head size when it differs (MLA v_head_dim), 0 = same */
    uint64_t q_lora_rank;      /* MLA: low-rank query width, 0 = direct q projection */
    uint64_t kv_lora_rank;     /* MLA: latent of keys and values, 0 = no MLA */
    uint64_t qk_rope_head_dim; /* MLA: rotary part of head_dim (head_dim = nope + rope) */
    uint64_t moe_intermediate; /* routed-expert MLP width, 0 = intermediate */
    uint64_t n_dense_layers;   /* MoE model: layers with a dense MLP of width intermediate */
    uint64_t n_shared_experts; /* always-active experts (deepseek), moe_intermediate wide */
    uint64_t shared_intermediate; /* qwen2_moe: width of its one shared expert */
    bool shared_expert_gate;      /* qwen2_moe: a sigmoid gate (h x 1) on the shared expert */
    bool router_bias;        /* a vector of n_experts per MoE layer on the router: deepseek-v3's
                                e_score_correction_bias, gpt-oss's router Linear bias */
    struct gm_quant quant;   /* the checkpoint's weight format (quantization_config) */
    unsigned from_shapes;    /* GM_FROM_SHAPES_* flags: fields the weight files filled in */
    bool generic;            /* an architecture gpumem does not know, sized from its files */
    bool no_config;          /* safetensors without a config.json: sized from the header
                                alone (the layout generic) */
    bool text_only;          /* the language model of a multimodal checkpoint
                                (text_config): its vision tower is not counted */
    bool incomplete;         /* the config lacked fields (GM_ERR_FORMAT "missing fields") */
    bool attn_sinks;         /* a learned sink logit per query head per layer (gpt-oss) */
    uint64_t index_n_heads;  /* DeepSeek-V3.2 sparse-attention indexer: its heads, */
    uint64_t index_head_dim; /* their width (one shared key per token, cached), */
    uint64_t index_topk;     /* and the tokens each query attends to; 0 = no indexer */
    /* ---- linear-attention layers (Qwen3-Next's Gated DeltaNet): a fixed-size recurrent and
       convolution state per sequence instead of a KV cache ---- */
    uint64_t n_linear_layers; /* layers of linear attention (the rest keep KV) */
    uint64_t lin_k_heads;     /* linear_num_key_heads */
    uint64_t lin_v_heads;     /* linear_num_value_heads */
    uint64_t lin_k_dim;       /* linear_key_head_dim */
    uint64_t lin_v_dim;       /* linear_value_head_dim */
    uint64_t lin_conv_kernel; /* linear_conv_kernel_dim */
    uint64_t mamba_d_state;   /* Mamba layers: SSM state size per channel, */
    uint64_t mamba_d_inner;   /* their channels (Mamba-2: heads x head dim); 0 = no Mamba, */
    uint64_t mamba_dt_rank;   /* Mamba-1: the rank of the time-step projection */
    uint64_t mamba_heads;     /* Mamba-2 (Nemotron-H, Falcon-H1): SSM heads of d_inner / heads
                                 channels, one dt, A and D each; 0 = Mamba-1 (Jamba) */
    uint64_t mamba_groups;    /* Mamba-2: groups of B and C (n_groups), d_state wide each */
    bool mamba_gated_norm;    /* Mamba-2: a gated RMSNorm of d_inner before out_proj */
    enum gm_layer_mix mix;    /* how attention, linear-attention and MLP layers combine */
    uint64_t n_attn_layers;   /* GM_MIX_PATTERN: layers that attend (keep KV), */
    uint64_t n_mlp_layers;    /* and layers that are an MLP; the rest are linear attention */
    bool attn_output_gate;    /* q_proj also yields a sigmoid gate on the attention output
                                 (Qwen3-Next): twice the query width */
    struct gm_vision vision;  /* a vision-language model's tower (counted with the
                                 language model, as GM_ROLE_OTHER); kind NONE otherwise */
    bool chunked_attention;   /* the windowed layers attend within fixed chunks of
                                 sliding_window tokens (Llama-4 attention_chunk_size), not a
                                 window sliding with each token: the KV bound is the same */
};

/* Fields taken from tensor shapes because the metadata left them out (or disagreed). */
#define GM_FROM_SHAPES_VOCAB    (1u << 0)
#define GM_FROM_SHAPES_FFN      (1u << 1)
#define GM_FROM_SHAPES_KV_HEADS (1u << 2)
#define GM_FROM_SHAPES_HIDDEN   (1u << 3)
#define GM_FROM_SHAPES_LAYERS   (1u << 4)
#define GM_FROM_SHAPES_HEAD_DIM (1u << 5)

/* One kind of matrix weight of a model: 'copies' weights of out x in (and a bias of out
 * when 'bias'), all of one role. */
struct gm_linear_class {
    enum gm_param_role role;
    uint64_t in;
    uint64_t out;
    uint64_t copies;
    bool bias;
};

#define GM_MAX_LINEAR_CLASSES 40

/* Parameter counts by role; every figure is elements (not bytes). */
struct gm_param_counts {
    uint64_t total;          /* everything, shared tensors once */
    uint64_t embedding;      /* token embedding table (also the lm_head when tied) */
    uint64_t positions;      /* learned position and token-type tables */
    uint64_t attention;      /* all layers: q, k, v, o weights and biases */
    uint64_t mlp;            /* all layers, all experts, router included */
    uint64_t norms;          /* all norms, final norm included */
    uint64_t lm_head;        /* untied lm_head (0 when tied), bias included */
    uint64_t other;          /* pooler, ... */
    uint64_t matmul;         /* elements of weights used in matrix products (autocast copies) */
    uint64_t active;         /* used per token (MoE: only the top-k experts) */
    uint64_t largest_tensor; /* elements of the largest single tensor */
    uint64_t n_tensors;      /* number of parameter tensors */
    uint64_t factored_state; /* Adafactor: sum of rows+cols of matrices + size of vectors */
    /* ---- per-stack and per-role counts (encoder-decoders, weight formats) ---- */
    uint64_t encoder; /* encoder-decoder: the encoder stack's layers (in attention/mlp) */
    uint64_t by_role[GM_ROLE__COUNT]; /* elements by role (embedding, attention, ...) */
    size_t n_linears; /* matrix weights by shape and role: what weight formats quantise */
    struct gm_linear_class linears[GM_MAX_LINEAR_CLASSES];
};

/* Tokens the language model reads for one image of w x h pixels (a CLIP tower: its fixed
 * (image_size / patch)^2 whatever the size; Qwen-VL: the image resized to multiples of
 * patch x merge, each merge x merge patches one token); *patches receives the vision
 * tower's sequence (patches of the image; CLIP: + the class token).  0 without a tower. */
uint64_t gm_model_image_tokens(const struct gm_model *m, uint64_t w, uint64_t h, uint64_t *patches);

/* Elements of one linear-attention layer's state per sequence as 'who' keeps it: the
 * recurrent state in *recurrent (Gated DeltaNet: value heads x key dim x value dim; Mamba:
 * d_inner x d_state), the causal convolution's in *conv (transformers: the whole kernel;
 * vLLM: kernel - 1 columns) over its channels (q, k and v; Mamba: d_inner).  Zeros without
 * linear-attention layers. */
void gm_model_linear_state(const struct gm_model *m, bool vllm, uint64_t *recurrent,
                           uint64_t *conv);

/* Layers that attend and keep a KV cache (of the decoder-only stack or an encoder's layers),
 * and layers that run an MLP, as the model's layer mix lays them out. */
uint64_t gm_model_attention_layers(const struct gm_model *m);
uint64_t gm_model_mlp_layers(const struct gm_model *m);

/* Set every field of 'm' to unknown. */
void gm_model_init(struct gm_model *m);

/* Check that the fields the parameter count and the estimator need are present and
 * consistent.  GM_ERR_FORMAT naming the missing/invalid fields ("missing fields:
 * hidden_size, num_hidden_layers"), or GM_ERR_UNSUPPORTED for an unknown family. */
enum gm_status gm_model_validate(const struct gm_model *m, struct gm_error *err);

/* Count parameters from the architecture fields.  'm' must pass gm_model_validate().
 * Saturates instead of overflowing on absurd fields.  Returns GM_OK or the validation
 * error. */
enum gm_status gm_model_count_params(const struct gm_model *m, struct gm_param_counts *out,
                                     struct gm_error *err);

/* Parse the text of an HF config.json ('len' bytes, need not be NUL-terminated).
 * GM_ERR_FORMAT (with the byte offset of a JSON syntax error, or naming the missing
 * fields: then 'out' holds what the config gives, with out->incomplete set),
 * GM_ERR_UNSUPPORTED for a model_type gpumem cannot count (then 'out' is reset with
 * out->arch GM_ARCH_UNKNOWN and out->model_type naming it). */
enum gm_status gm_model_parse_hf_config(const char *json, size_t len, struct gm_model *out,
                                        struct gm_error *err);

/* Load 'path': a config.json file, or a directory holding one.  GM_ERR_NOENT when
 * missing, GM_ERR_IO, or the errors of gm_model_parse_hf_config(). */
enum gm_status gm_model_load_hf_config(const char *path, struct gm_model *out,
                                       struct gm_error *err);

/* Built-in catalog.  Names match case-insensitively, with or without the Hub organisation
 * ("meta-llama/Llama-2-7b-hf", "llama-2-7b-hf", "llama-2-7b").  Returns NULL when not
 * found.  Borrowed, static storage. */
const struct gm_model *gm_model_catalog_find(const char *name);
size_t gm_model_catalog_count(void);
const struct gm_model *gm_model_catalog_get(size_t i);
/* The Hub id of a catalog entry ("meta-llama/Llama-2-7b-hf"); static storage. */
const char *gm_model_catalog_hub_id(size_t i);
/* The other names of a catalog entry, lowercase and space-separated ("llama-3-8b
 * meta-llama-3-8b"), that gm_model_catalog_find() takes too; static storage, "" for none. */
const char *gm_model_catalog_aliases(size_t i);

/* A catalog entry by the name people use: its Hub id, its name or an alias, case-insensitively,
 * with or without the organisation; else a model of the same architecture under another name
 * (Llama-3.3-70B is Llama-3.1-70B's), or the name with a variant word dropped ("instruct",
 * "chat", "it": "Qwen/Qwen2.5-7B-Instruct" is Qwen2.5-7B).  *index (may be NULL) receives the
 * entry's index; *kin (may be NULL) whether the name is another model's or a variant's.
 * NULL when none matches.  Static storage. */
const struct gm_model *gm_model_catalog_match(const char *name, size_t *index, bool *kin);
/* The catalog name or Hub id 'name' is most likely a slip for (gm_text_closest()), or NULL;
 * static storage. */
const char *gm_model_catalog_closest(const char *name);

/* ---- Hugging Face Hub ids, offline (hub.c) ---- */

/* A Hub id as people write it: "org/name", or "name", with an optional "@revision". */
struct gm_hf_id {
    char org[97]; /* "" without one */
    char name[97];
    char revision[97]; /* "" for the default branch */
};
/* Parse 'spec' as a Hub id (each part letters, digits, '.', '-', '_').  False when it is not
 * one (a path, a file name with another character, an empty part). */
bool gm_hf_id_parse(const char *spec, struct gm_hf_id *out);

/* The Hugging Face hub cache folder as huggingface_hub finds it (HF_HUB_CACHE,
 * HUGGINGFACE_HUB_CACHE, $HF_HOME/hub, $XDG_CACHE_HOME/huggingface/hub,
 * $HOME/.cache/huggingface/hub), read through 'env', into out[n].  False when none can be
 * formed or it does not fit. */
bool gm_hf_hub_cache(gm_env_fn env, char *out, size_t n);
/* The snapshot folder of 'id' in hub cache 'cache' (models--org--name/snapshots/<commit>: the
 * commit refs/<revision> names, refs/main by default, or the revision itself when it is a
 * commit; with no ref, the newest snapshot holding a config.json) into out[n], its commit
 * into commit[41] (may be NULL).  GM_ERR_NOENT when the cache holds no copy. */
enum gm_status gm_hf_hub_snapshot(const char *cache, const struct gm_hf_id *id, char *out, size_t n,
                                  char commit[41], struct gm_error *err);

/* Name 'm' after 'path' when it has no name yet: a folder by its name, a config file by its
 * own name ("gpt2.json"), ".../m/config.json" by its folder "m". */
void gm_model_name_from_path(struct gm_model *m, const char *path);

/* Names: "llama", "bf16", ...; static storage, "unknown" for out-of-range values.  The
 * architectures gpumem knows are GM_ARCH_UNKNOWN + 1 .. GM_ARCH__COUNT - 1. */
const char *gm_arch_name(enum gm_arch a);
/* Whether the architecture's Hugging Face modules fuse q, k and v into one linear (GPT-2
 * and GPTBigCode c_attn, GPT-NeoX and Falcon query_key_value, Phi-3 qkv_proj, ModernBERT
 * Wqkv): what a LoRA target can name. */
bool gm_arch_fused_qkv(enum gm_arch a);
/* Whether the architecture's transformers class computes attention eagerly whatever
 * attn_implementation asks (no SDPA or flash path): T5 adds its relative position bias to
 * materialised scores (modeling_t5.py T5Attention), gpt-oss declares _supports_sdpa = False
 * for its sinks (modeling_gpt_oss.py).  The s x s scores are then kept for backward. */
bool gm_arch_hf_eager(enum gm_arch a);
/* The names an architecture's Hugging Face causal-LM class gives its token embedding and its
 * output head, where they were read: what code that matches module names sees (TRL's
 * peft_module_casting_to_bf16 matches "embed_tokens", "lm_head", "wte", "wpe"). */
enum gm_hf_embed_names {
    GM_HF_EMBED_NAMES_UNKNOWN = 0,  /* not read */
    GM_HF_EMBED_NAMES_EMBED_TOKENS, /* model.embed_tokens and lm_head */
};
enum gm_hf_embed_names gm_arch_hf_embed_names(enum gm_arch a);
const char *gm_dtype_name(enum gm_dtype t);
/* Parse a dtype name as HF/torch/safetensors spell it ("bfloat16", "bf16", "BF16",
 * "float32", "F32", "fp8", ...).  GM_DTYPE_UNKNOWN when not recognised. */
enum gm_dtype gm_dtype_parse(const char *s);
/* Bits per element (4 for INT4/NF4, 8 for FP8, ...); 0 for UNKNOWN. */
unsigned gm_dtype_bits(enum gm_dtype t);

/* ---- weight formats (bitsandbytes, GPTQ, AWQ, FP8) ---- */

/* "gptq", "awq", "nf4", ...; static storage, "unknown" out of range. */
const char *gm_quant_method_name(enum gm_quant_method q);
/* A rope_scaling type as config.json names it ("linear", "yarn", ...; "default" for none,
 * "other" for a type not listed); static storage. */
const char *gm_rope_scaling_name(enum gm_rope_scaling k);
/* "embedding", "attention", ...; static storage. */
const char *gm_param_role_name(enum gm_param_role r);
/* A scheme with its defaults: GPTQ and AWQ 4 bits in groups of 128 with zeros (GPTQ also
 * g_idx), INT 4 bits in groups of 128, FP8 one scale per tensor, bitsandbytes 4-bit without
 * double quantisation (transformers' BitsAndBytesConfig defaults). */
void gm_quant_init(struct gm_quant *q, enum gm_quant_method method);
/* The roles (1 << enum gm_param_role) the scheme leaves unquantised: embeddings, norms and
 * the lm_head always (unless q->lm_head); GPTQ, AWQ, FP8 and INT quantise the linears of
 * the decoder layers only, so the router and the pooler/classifier stay too (NVFP4 as
 * they); MXFP4 the MoE experts only (the MLP role); bitsandbytes converts every other
 * nn.Linear.  Plus q->keep. */
unsigned gm_quant_kept_roles(const struct gm_quant *q);
/* The roles a module name of modules_to_not_convert / ignore / llm_int8_skip_modules
 * stands for ("lm_head", "gate", "re:.*mlp.gate$", "self_attn"); 0 for a name naming one
 * layer ("model.layers.0.mlp"), which no role can express. */
unsigned gm_quant_module_roles(const char *name);

#pragma GCC visibility pop
#ifdef __cplusplus
}
#endif
#endif
