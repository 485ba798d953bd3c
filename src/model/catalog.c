/* SPDX-License-Identifier: MIT */
/* catalog.c - built-in architectures of common models, so estimates work offline.
 *
 * Each entry holds the fields of the model's published config.json (Hugging Face Hub,
 * "<org>/<model>/config.json"); the parameter count is derived from them by
 * gm_model_count_params() exactly as for a config file read from disk, and the unit tests
 * compare it with each model's published exact count. */
#include "gpumem/model.h"

#include "gpumem/error.h"
#include "gpumem/text.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

struct entry {
    const char *hub_id;
    const char *aliases; /* space-separated, lowercase */
    struct gm_model m;
};

/* Other models with the architecture of a catalog entry (their published config.json
 * differs in none of the fields gpumem reads): names and Hub ids, space-separated. */
static const struct {
    const char *hub_id; /* the entry's */
    const char *kin;
} kin_models[] = {
    {"meta-llama/Llama-3.1-70B",
     "llama-3.3-70b llama3.3-70b meta-llama/Llama-3.3-70B meta-llama/Llama-3.3-70B-Instruct"},
};

/* Words of a name that make a variant of a model with its base's architecture
 * ("Llama-3.1-8B-Instruct", "Llama-2-7b-chat-hf", "gemma-2-9b-it"). */
static const char *const variant_words[] = {"instruct", "chat", "it"};

#define BASE(nm, type, ar, h, L, nh, nkv, hd, I, V, pos)                                           \
    .name = nm, .model_type = type, .arch = ar, .hidden = h, .n_layers = L, .n_heads = nh,         \
    .n_kv_heads = nkv, .head_dim = hd, .intermediate = I, .vocab = V, .max_positions = pos

/* Causal LM with a final norm and two norms per layer. */
#define STD .head = GM_HEAD_CAUSAL_LM, .final_norm = true, .norms_per_layer = 2

/* Llama layout: RMSNorm, SwiGLU, no biases. */
#define LLAMA_LIKE(nm, type, ar, h, L, nh, nkv, hd, I, V, pos, tied, dt)                           \
    {                                                                                              \
        BASE(nm, type, ar, h, L, nh, nkv, hd, I, V, pos), STD,                                     \
            .norm = GM_NORM_RMS, .act = GM_ACT_SILU, .gated_mlp = true, .tied_embeddings = tied,   \
            .dtype = dt                                                                            \
    }

#define NEOX(nm, h, L, nh, I, V, pos)                                                              \
    {                                                                                              \
        BASE(nm, "gpt_neox", GM_ARCH_GPT_NEOX, h, L, nh, nh, (h) / (nh), I, V, pos), STD,          \
            .norm = GM_NORM_LAYER, .act = GM_ACT_GELU, .qkv_bias = true, .out_bias = true,         \
            .mlp_bias = true, .dtype = GM_DTYPE_F16                                                \
    }

#define BERT(nm, h, L, nh, I)                                                                      \
    {                                                                                              \
        BASE(nm, "bert", GM_ARCH_BERT, h, L, nh, nh, (h) / (nh), I, 30522, 512),                   \
            .head = GM_HEAD_ENCODER, .norms_per_layer = 2, .norm = GM_NORM_LAYER,                  \
            .act = GM_ACT_GELU, .qkv_bias = true, .out_bias = true, .mlp_bias = true,              \
            .n_positions_learned = 512, .n_token_types = 2, .attn_dropout = 0.1,                   \
            .hidden_dropout = 0.1, .dtype = GM_DTYPE_F32, .pooler = true, .emb_norm = true         \
    }

#define F16  GM_DTYPE_F16
#define BF16 GM_DTYPE_BF16
#define F32  GM_DTYPE_F32

/* ---- encoders, encoder-decoders and the other non-Llama layouts ---- */

/* Post-LN encoders of the BERT family (base model with pooler unless 'pool' is false). */
#define ENCODER(nm, type, ar, h, L, nh, I, V, pos, types, pool)                                    \
    {                                                                                              \
        BASE(nm, type, ar, h, L, nh, nh, (h) / (nh), I, V, pos),                                   \
            .head = GM_HEAD_ENCODER, .norms_per_layer = 2, .norm = GM_NORM_LAYER,                  \
            .act = GM_ACT_GELU, .qkv_bias = true, .out_bias = true, .mlp_bias = true,              \
            .n_positions_learned = pos, .n_token_types = types, .attn_dropout = 0.1,               \
            .hidden_dropout = 0.1, .dtype = F32, .pooler = pool, .emb_norm = true                  \
    }

/* DeBERTa-v3: no absolute positions, a relative table of 2 x 256 rows. */
#define DEBERTA3(nm, h, L, nh, I)                                                                  \
    {                                                                                              \
        BASE(nm, "deberta-v2", GM_ARCH_DEBERTA_V2, h, L, nh, nh, (h) / (nh), I, 128100, 512),      \
            .head = GM_HEAD_ENCODER, .norms_per_layer = 2, .norm = GM_NORM_LAYER,                  \
            .act = GM_ACT_GELU, .qkv_bias = true, .out_bias = true, .mlp_bias = true,              \
            .rel_pos_rows = 512, .attn_dropout = 0.1, .hidden_dropout = 0.1, .dtype = F32,         \
            .emb_norm = true                                                                       \
    }

/* ModernBERT: pre-norm, bias-free LayerNorm, GeGLU, no attention norm in layer 0. */
#define MODERNBERT(nm, h, L, nh, I)                                                                \
    {                                                                                              \
        BASE(nm, "modernbert", GM_ARCH_MODERNBERT, h, L, nh, nh, (h) / (nh), I, 50368, 8192),      \
            .head = GM_HEAD_ENCODER, .norms_per_layer = 2, .norm = GM_NORM_LAYER_NOBIAS,           \
            .act = GM_ACT_GELU, .gated_mlp = true, .final_norm = true, .emb_norm = true,           \
            .no_first_attn_norm = true, .dtype = F32                                               \
    }

/* T5 (relu, tied) and T5 v1.1 / FLAN-T5 (gated-gelu, untied): encoder-decoder. */
#define T5(nm, d, dkv, nh, ff, L, gated, dt)                                                       \
    {                                                                                              \
        BASE(nm, "t5", GM_ARCH_T5, d, L, nh, nh, dkv, ff, 32128, 0),                               \
            .head = GM_HEAD_SEQ2SEQ_LM, .n_decoder_layers = L, .norms_per_layer = 2,               \
            .final_norm = true, .norm = GM_NORM_RMS, .act = (gated) ? GM_ACT_GELU : GM_ACT_RELU,   \
            .gated_mlp = gated, .tied_embeddings = !(gated), .rel_attn_buckets = 32,               \
            .hidden_dropout = 0.1, .dtype = dt                                                     \
    }

#define BART(nm, d, L, nh, ff)                                                                     \
    {                                                                                              \
        BASE(nm, "bart", GM_ARCH_BART, d, L, nh, nh, (d) / (nh), ff, 50265, 1024),                 \
            .head = GM_HEAD_SEQ2SEQ_LM, .n_decoder_layers = L, .norms_per_layer = 2,               \
            .norm = GM_NORM_LAYER, .act = GM_ACT_GELU, .qkv_bias = true, .out_bias = true,         \
            .mlp_bias = true, .tied_embeddings = true, .emb_norm = true,                           \
            .n_positions_learned = 1026, .hidden_dropout = 0.1, .dtype = F32                       \
    }

/* GPT-BigCode: GPT-2 layout with one KV head. */
#define BIGCODE(nm, h, L, nh, V, pos)                                                              \
    {                                                                                              \
        BASE(nm, "gpt_bigcode", GM_ARCH_GPT_BIGCODE, h, L, nh, 1, (h) / (nh), 4 * (h), V, pos),    \
            STD, .norm = GM_NORM_LAYER, .act = GM_ACT_GELU, .qkv_bias = true, .out_bias = true,    \
                 .mlp_bias = true, .tied_embeddings = true, .n_positions_learned = pos,            \
                 .dtype = F32                                                                      \
    }

/* Falcon: parallel attention and MLP, LayerNorm, GELU 4h, tied. */
#define FALCON(nm, h, L, nh, nkv, lns, bias, V)                                                    \
    {                                                                                              \
        BASE(nm, "falcon", GM_ARCH_FALCON, h, L, nh, nkv, (h) / (nh), 4 * (h), V, 2048),           \
            .head = GM_HEAD_CAUSAL_LM, .final_norm = true, .norms_per_layer = lns,                 \
            .norm = GM_NORM_LAYER, .act = GM_ACT_GELU, .qkv_bias = bias, .out_bias = bias,         \
            .mlp_bias = bias, .tied_embeddings = true, .dtype = BF16                               \
    }

#define STARCODER2(nm, h, L, nh, nkv, I, tied)                                                     \
    {                                                                                              \
        BASE(nm, "starcoder2", GM_ARCH_STARCODER2, h, L, nh, nkv, (h) / (nh), I, 49152, 16384),    \
            STD, .norm = GM_NORM_LAYER, .act = GM_ACT_GELU, .qkv_bias = true, .out_bias = true,    \
                 .mlp_bias = true, .tied_embeddings = tied, .sliding_window = 4096,                \
                 .n_sliding_layers = L, .dtype = F32                                               \
    }

/* Gemma-3 text models: 4 norms, q/k norms, 5 local (window) : 1 global layers. */
#define GEMMA3(nm, h, L, nh, nkv, hd, I, V, pos, win)                                              \
    {                                                                                              \
        BASE(nm, "gemma3_text", GM_ARCH_GEMMA3, h, L, nh, nkv, hd, I, V, pos),                     \
            .head = GM_HEAD_CAUSAL_LM, .final_norm = true, .norms_per_layer = 4,                   \
            .norm = GM_NORM_RMS, .act = GM_ACT_GELU, .gated_mlp = true, .tied_embeddings = true,   \
            .qk_norm = true, .sliding_window = win, .n_sliding_layers = (L) - (L) / 6,             \
            .text_only = (V) == 262208, .dtype = BF16                                              \
    }

/* DeepSeek MLA + MoE (kv_lora 512, rope 64, nope 128, v 128). */
#define DEEPSEEK(nm, type, ar, h, L, nh, qlora, I, moeI, E, shared, k, dense, V, pos, rbias, q)    \
    {                                                                                              \
        BASE(nm, type, ar, h, L, nh, nh, 192, I, V, pos), STD,                                     \
            .norm = GM_NORM_RMS, .act = GM_ACT_SILU, .gated_mlp = true, .q_lora_rank = qlora,      \
            .kv_lora_rank = 512, .qk_rope_head_dim = 64, .head_dim_v = 128,                        \
            .moe_intermediate = moeI, .n_experts = E, .n_experts_active = k,                       \
            .n_shared_experts = shared, .n_dense_layers = dense, .router_bias = rbias, .quant = q, \
            .dtype = BF16                                                                          \
    }

/* DeepSeek-V3.2 (model_type deepseek_v32): DeepSeek-V3's layout and FP8 block weights plus the
 * sparse-attention indexer of 64 heads of 128, each query attending to its top 2048 tokens. */
#define DEEPSEEK_V32(nm)                                                                           \
    {                                                                                              \
        BASE(nm, "deepseek_v32", GM_ARCH_DEEPSEEK_V3, 7168, 61, 128, 128, 192, 18432, 129280,      \
             163840),                                                                              \
            STD, .norm = GM_NORM_RMS, .act = GM_ACT_SILU, .gated_mlp = true, .q_lora_rank = 1536,  \
                 .kv_lora_rank = 512, .qk_rope_head_dim = 64, .head_dim_v = 128,                   \
                 .moe_intermediate = 2048, .n_experts = 256, .n_experts_active = 8,                \
                 .n_shared_experts = 1, .n_dense_layers = 3, .router_bias = true,                  \
                 .quant = FP8_BLOCK128, .dtype = BF16, .index_n_heads = 64, .index_head_dim = 128, \
                 .index_topk = 2048                                                                \
    }

/* DeepSeek-V3's published checkpoint: FP8 e4m3 weights, an fp32 scale per 128 x 128 block
 * (config.json quantization_config: quant_method fp8, weight_block_size [128, 128]). */
#define FP8_BLOCK128                                                                               \
    {                                                                                              \
        .method = GM_QUANT_FP8, .bits = 8, .scale = GM_SCALE_BLOCK, .block_rows = 128,             \
        .block_cols = 128                                                                          \
    }
/* gpt-oss's published checkpoints: MXFP4 experts (quant_method mxfp4), the rest bf16
 * (modules_to_not_convert: self_attn, mlp.router, embed_tokens, lm_head). */
#define MXFP4_EXPERTS                                                                              \
    {                                                                                              \
        .method = GM_QUANT_MXFP4, .bits = 4, .group_size = 32, .scale = GM_SCALE_GROUP,            \
        .keep = (1u << GM_ROLE_ATTENTION) | (1u << GM_ROLE_ROUTER)                                 \
    }

/* gpt-oss (openai/gpt-oss-*: GptOssConfig): 64 query heads of 64, 8 KV heads, biased
 * attention with sinks, 128-token windows on every other layer, experts of 2880 with biases,
 * a biased router, untied embeddings. */
#define GPT_OSS(nm, L, E)                                                                          \
    {                                                                                              \
        BASE(nm, "gpt_oss", GM_ARCH_GPT_OSS, 2880, L, 64, 8, 64, 2880, 201088, 131072), STD,       \
            .norm = GM_NORM_RMS, .act = GM_ACT_SILU, .gated_mlp = true, .qkv_bias = true,          \
            .out_bias = true, .mlp_bias = true, .router_bias = true, .attn_sinks = true,           \
            .n_experts = E, .n_experts_active = 4, .sliding_window = 128,                          \
            .n_sliding_layers = (L) / 2, .quant = MXFP4_EXPERTS, .dtype = BF16                     \
    }

/* Llama-4 text model (Llama4TextConfig): 40 heads of 128, 8 KV heads, experts of 8192 with
 * one shared expert, dense layers of 16384, chunked attention (8192) on 3 of 4 layers; the
 * vision tower of the checkpoint is not counted. */
#define LLAMA4(nm, E, dense, pos)                                                                  \
    {                                                                                              \
        BASE(nm, "llama4_text", GM_ARCH_LLAMA4, 5120, 48, 40, 8, 128, 16384, 202048, pos), STD,    \
            .norm = GM_NORM_RMS, .act = GM_ACT_SILU, .gated_mlp = true, .moe_intermediate = 8192,  \
            .n_experts = E, .n_experts_active = 1, .n_shared_experts = 1, .n_dense_layers = dense, \
            .sliding_window = 8192, .n_sliding_layers = 36, .chunked_attention = true,             \
            .text_only = true, .dtype = BF16                                                       \
    }

/* Kimi K2 Thinking's published checkpoint: compressed-tensors pack-quantized int4 experts,
 * symmetric, one scale per 32 inputs; attention kept in bf16 (ignore: self_attn, lm_head). */
#define INT4_GROUP32_EXPERTS                                                                       \
    {                                                                                              \
        .method = GM_QUANT_INT, .bits = 4, .group_size = 32, .keep = 1u << GM_ROLE_ATTENTION       \
    }

#define NO_QUANT                                                                                   \
    {                                                                                              \
        .method = GM_QUANT_NONE                                                                    \
    }

static const struct entry catalog[] = {
    /* Llama 2 / 3 / 3.1 / 3.2 */
    {"meta-llama/Llama-2-7b-hf", "llama-2-7b llama2-7b",
     LLAMA_LIKE("Llama-2-7b-hf", "llama", GM_ARCH_LLAMA, 4096, 32, 32, 32, 128, 11008, 32000, 4096,
                false, F16)},
    {"meta-llama/Llama-2-13b-hf", "llama-2-13b llama2-13b",
     LLAMA_LIKE("Llama-2-13b-hf", "llama", GM_ARCH_LLAMA, 5120, 40, 40, 40, 128, 13824, 32000, 4096,
                false, F16)},
    {"meta-llama/Llama-2-70b-hf", "llama-2-70b llama2-70b",
     LLAMA_LIKE("Llama-2-70b-hf", "llama", GM_ARCH_LLAMA, 8192, 80, 64, 8, 128, 28672, 32000, 4096,
                false, F16)},
    {"meta-llama/Meta-Llama-3-8B", "llama-3-8b llama3-8b",
     LLAMA_LIKE("Meta-Llama-3-8B", "llama", GM_ARCH_LLAMA, 4096, 32, 32, 8, 128, 14336, 128256,
                8192, false, BF16)},
    {"meta-llama/Meta-Llama-3-70B", "llama-3-70b llama3-70b",
     LLAMA_LIKE("Meta-Llama-3-70B", "llama", GM_ARCH_LLAMA, 8192, 80, 64, 8, 128, 28672, 128256,
                8192, false, BF16)},
    {"meta-llama/Llama-3.1-8B", "llama-3.1-8b llama3.1-8b meta-llama-3.1-8b",
     LLAMA_LIKE("Llama-3.1-8B", "llama", GM_ARCH_LLAMA, 4096, 32, 32, 8, 128, 14336, 128256, 131072,
                false, BF16)},
    {"meta-llama/Llama-3.1-70B", "llama-3.1-70b llama3.1-70b meta-llama-3.1-70b",
     LLAMA_LIKE("Llama-3.1-70B", "llama", GM_ARCH_LLAMA, 8192, 80, 64, 8, 128, 28672, 128256,
                131072, false, BF16)},
    {"meta-llama/Llama-3.1-405B", "llama-3.1-405b llama3.1-405b meta-llama-3.1-405b",
     LLAMA_LIKE("Llama-3.1-405B", "llama", GM_ARCH_LLAMA, 16384, 126, 128, 8, 128, 53248, 128256,
                131072, false, BF16)},
    {"meta-llama/Llama-3.2-1B", "llama-3.2-1b llama3.2-1b",
     LLAMA_LIKE("Llama-3.2-1B", "llama", GM_ARCH_LLAMA, 2048, 16, 32, 8, 64, 8192, 128256, 131072,
                true, BF16)},
    {"meta-llama/Llama-3.2-3B", "llama-3.2-3b llama3.2-3b",
     LLAMA_LIKE("Llama-3.2-3B", "llama", GM_ARCH_LLAMA, 3072, 28, 24, 8, 128, 8192, 128256, 131072,
                true, BF16)},
    /* Mistral / Mixtral */
    {"mistralai/Mistral-7B-v0.1",
     "mistral-7b mistral-7b-v0.1",
     {BASE("Mistral-7B-v0.1", "mistral", GM_ARCH_MISTRAL, 4096, 32, 32, 8, 128, 14336, 32000,
           32768),
      STD, .norm = GM_NORM_RMS, .act = GM_ACT_SILU, .gated_mlp = true, .sliding_window = 4096,
      .n_sliding_layers = 32, .dtype = BF16}},
    /* Mistral-Nemo: head_dim 128 beside a hidden size of 5120 (32 heads), no sliding window */
    {"mistralai/Mistral-Nemo-Base-2407",
     "mistral-nemo mistral-nemo-12b",
     {BASE("Mistral-Nemo-Base-2407", "mistral", GM_ARCH_MISTRAL, 5120, 40, 32, 8, 128, 14336,
           131072, 1024000),
      STD, .norm = GM_NORM_RMS, .act = GM_ACT_SILU, .gated_mlp = true, .dtype = BF16}},
    {"mistralai/Mixtral-8x7B-v0.1",
     "mixtral-8x7b mixtral-8x7b-v0.1",
     {BASE("Mixtral-8x7B-v0.1", "mixtral", GM_ARCH_MIXTRAL, 4096, 32, 32, 8, 128, 14336, 32000,
           32768),
      STD, .norm = GM_NORM_RMS, .act = GM_ACT_SILU, .gated_mlp = true, .n_experts = 8,
      .n_experts_active = 2, .dtype = BF16}},
    /* Qwen2.5: q/k/v biases; the small ones are tied. */
    {"Qwen/Qwen2.5-0.5B",
     "qwen2.5-0.5b",
     {BASE("Qwen2.5-0.5B", "qwen2", GM_ARCH_QWEN2, 896, 24, 14, 2, 64, 4864, 151936, 32768), STD,
      .norm = GM_NORM_RMS, .act = GM_ACT_SILU, .gated_mlp = true, .qkv_bias = true,
      .tied_embeddings = true, .dtype = BF16}},
    {"Qwen/Qwen2.5-1.5B",
     "qwen2.5-1.5b",
     {BASE("Qwen2.5-1.5B", "qwen2", GM_ARCH_QWEN2, 1536, 28, 12, 2, 128, 8960, 151936, 131072), STD,
      .norm = GM_NORM_RMS, .act = GM_ACT_SILU, .gated_mlp = true, .qkv_bias = true,
      .tied_embeddings = true, .dtype = BF16}},
    {"Qwen/Qwen2.5-3B",
     "qwen2.5-3b",
     {BASE("Qwen2.5-3B", "qwen2", GM_ARCH_QWEN2, 2048, 36, 16, 2, 128, 11008, 151936, 32768), STD,
      .norm = GM_NORM_RMS, .act = GM_ACT_SILU, .gated_mlp = true, .qkv_bias = true,
      .tied_embeddings = true, .dtype = BF16}},
    {"Qwen/Qwen2.5-7B",
     "qwen2.5-7b",
     {BASE("Qwen2.5-7B", "qwen2", GM_ARCH_QWEN2, 3584, 28, 28, 4, 128, 18944, 152064, 131072), STD,
      .norm = GM_NORM_RMS, .act = GM_ACT_SILU, .gated_mlp = true, .qkv_bias = true, .dtype = BF16}},
    {"Qwen/Qwen2.5-14B",
     "qwen2.5-14b",
     {BASE("Qwen2.5-14B", "qwen2", GM_ARCH_QWEN2, 5120, 48, 40, 8, 128, 13824, 152064, 131072), STD,
      .norm = GM_NORM_RMS, .act = GM_ACT_SILU, .gated_mlp = true, .qkv_bias = true, .dtype = BF16}},
    {"Qwen/Qwen2.5-32B",
     "qwen2.5-32b",
     {BASE("Qwen2.5-32B", "qwen2", GM_ARCH_QWEN2, 5120, 64, 40, 8, 128, 27648, 152064, 131072), STD,
      .norm = GM_NORM_RMS, .act = GM_ACT_SILU, .gated_mlp = true, .qkv_bias = true, .dtype = BF16}},
    {"Qwen/Qwen2.5-72B",
     "qwen2.5-72b",
     {BASE("Qwen2.5-72B", "qwen2", GM_ARCH_QWEN2, 8192, 80, 64, 8, 128, 29568, 152064, 131072), STD,
      .norm = GM_NORM_RMS, .act = GM_ACT_SILU, .gated_mlp = true, .qkv_bias = true, .dtype = BF16}},
    /* Qwen3: explicit head_dim 128, q/k RMSNorm, no biases; the small ones are tied. */
    {"Qwen/Qwen3-0.6B",
     "qwen3-0.6b",
     {BASE("Qwen3-0.6B", "qwen3", GM_ARCH_QWEN3, 1024, 28, 16, 8, 128, 3072, 151936, 40960), STD,
      .norm = GM_NORM_RMS, .act = GM_ACT_SILU, .gated_mlp = true, .qk_norm = true,
      .tied_embeddings = true, .dtype = BF16}},
    {"Qwen/Qwen3-4B",
     "qwen3-4b",
     {BASE("Qwen3-4B", "qwen3", GM_ARCH_QWEN3, 2560, 36, 32, 8, 128, 9728, 151936, 40960), STD,
      .norm = GM_NORM_RMS, .act = GM_ACT_SILU, .gated_mlp = true, .qk_norm = true,
      .tied_embeddings = true, .dtype = BF16}},
    {"Qwen/Qwen3-8B",
     "qwen3-8b",
     {BASE("Qwen3-8B", "qwen3", GM_ARCH_QWEN3, 4096, 36, 32, 8, 128, 12288, 151936, 40960), STD,
      .norm = GM_NORM_RMS, .act = GM_ACT_SILU, .gated_mlp = true, .qk_norm = true, .dtype = BF16}},
    {"Qwen/Qwen3-14B",
     "qwen3-14b",
     {BASE("Qwen3-14B", "qwen3", GM_ARCH_QWEN3, 5120, 40, 40, 8, 128, 17408, 151936, 40960), STD,
      .norm = GM_NORM_RMS, .act = GM_ACT_SILU, .gated_mlp = true, .qk_norm = true, .dtype = BF16}},
    {"Qwen/Qwen3-32B",
     "qwen3-32b",
     {BASE("Qwen3-32B", "qwen3", GM_ARCH_QWEN3, 5120, 64, 64, 8, 128, 25600, 151936, 40960), STD,
      .norm = GM_NORM_RMS, .act = GM_ACT_SILU, .gated_mlp = true, .qk_norm = true, .dtype = BF16}},
    /* Gemma: explicit head_dim, tied, GeGLU; gemma-2 adds two norms and a window on every
     * other layer. */
    {"google/gemma-2b",
     "gemma-2b",
     {BASE("gemma-2b", "gemma", GM_ARCH_GEMMA, 2048, 18, 8, 1, 256, 16384, 256000, 8192), STD,
      .norm = GM_NORM_RMS, .act = GM_ACT_GELU, .gated_mlp = true, .tied_embeddings = true,
      .dtype = BF16}},
    {"google/gemma-7b",
     "gemma-7b",
     {BASE("gemma-7b", "gemma", GM_ARCH_GEMMA, 3072, 28, 16, 16, 256, 24576, 256000, 8192), STD,
      .norm = GM_NORM_RMS, .act = GM_ACT_GELU, .gated_mlp = true, .tied_embeddings = true,
      .dtype = BF16}},
    {"google/gemma-2-9b",
     "gemma-2-9b gemma2-9b",
     {BASE("gemma-2-9b", "gemma2", GM_ARCH_GEMMA2, 3584, 42, 16, 8, 256, 14336, 256000, 8192),
      .head = GM_HEAD_CAUSAL_LM, .final_norm = true, .norm = GM_NORM_RMS, .act = GM_ACT_GELU,
      .gated_mlp = true, .tied_embeddings = true, .norms_per_layer = 4, .sliding_window = 4096,
      .n_sliding_layers = 21, .attn_softcap = 50, .final_softcap = 30, .dtype = F16}},
    {"google/gemma-2-27b",
     "gemma-2-27b gemma2-27b",
     {BASE("gemma-2-27b", "gemma2", GM_ARCH_GEMMA2, 4608, 46, 32, 16, 128, 36864, 256000, 8192),
      .head = GM_HEAD_CAUSAL_LM, .final_norm = true, .norm = GM_NORM_RMS, .act = GM_ACT_GELU,
      .gated_mlp = true, .tied_embeddings = true, .norms_per_layer = 4, .sliding_window = 4096,
      .n_sliding_layers = 23, .attn_softcap = 50, .final_softcap = 30, .dtype = F16}},
    /* Phi */
    {"microsoft/phi-2",
     "phi-2 phi2",
     {BASE("phi-2", "phi", GM_ARCH_PHI, 2560, 32, 32, 32, 80, 10240, 51200, 2048),
      .head = GM_HEAD_CAUSAL_LM, .final_norm = true, .norms_per_layer = 1, .norm = GM_NORM_LAYER,
      .act = GM_ACT_GELU_NEW, .qkv_bias = true, .out_bias = true, .mlp_bias = true,
      .lm_head_bias = true, .hidden_dropout = 0.1, .dtype = F16}},
    {"microsoft/Phi-3-mini-4k-instruct",
     "phi-3-mini phi-3-mini-4k phi3-mini",
     {BASE("Phi-3-mini-4k-instruct", "phi3", GM_ARCH_PHI3, 3072, 32, 32, 32, 96, 8192, 32064, 4096),
      STD, .norm = GM_NORM_RMS, .act = GM_ACT_SILU, .gated_mlp = true, .sliding_window = 2047,
      .n_sliding_layers = 32, .dtype = BF16}},
    /* GPT-2 (124M): learned positions, tied, gelu_new. */
    {"openai-community/gpt2",
     "gpt2 gpt-2",
     {BASE("gpt2", "gpt2", GM_ARCH_GPT2, 768, 12, 12, 12, 64, 3072, 50257, 1024), STD,
      .norm = GM_NORM_LAYER, .act = GM_ACT_GELU_NEW, .qkv_bias = true, .out_bias = true,
      .mlp_bias = true, .tied_embeddings = true, .n_positions_learned = 1024, .attn_dropout = 0.1,
      .hidden_dropout = 0.1, .dtype = F16}},
    /* Pythia / GPT-NeoX */
    {"EleutherAI/pythia-160m", "pythia-160m", NEOX("pythia-160m", 768, 12, 12, 3072, 50304, 2048)},
    {"EleutherAI/pythia-1b", "pythia-1b", NEOX("pythia-1b", 2048, 16, 8, 8192, 50304, 2048)},
    {"EleutherAI/pythia-1.4b", "pythia-1.4b", NEOX("pythia-1.4b", 2048, 24, 16, 8192, 50304, 2048)},
    {"EleutherAI/pythia-2.8b", "pythia-2.8b",
     NEOX("pythia-2.8b", 2560, 32, 32, 10240, 50304, 2048)},
    {"EleutherAI/pythia-6.9b", "pythia-6.9b",
     NEOX("pythia-6.9b", 4096, 32, 32, 16384, 50432, 2048)},
    {"EleutherAI/pythia-12b", "pythia-12b", NEOX("pythia-12b", 5120, 36, 40, 20480, 50688, 2048)},
    {"EleutherAI/gpt-neox-20b", "gpt-neox-20b neox-20b",
     NEOX("gpt-neox-20b", 6144, 44, 64, 24576, 50432, 2048)},
    /* BERT (BertModel with pooler) */
    {"google-bert/bert-base-uncased", "bert-base-uncased bert-base",
     BERT("bert-base-uncased", 768, 12, 12, 3072)},
    {"google-bert/bert-large-uncased", "bert-large-uncased bert-large",
     BERT("bert-large-uncased", 1024, 24, 16, 4096)},
    /* ---- encoders, encoder-decoders and the other non-Llama layouts ---- */
    /* Encoders (base models as AutoModel loads them; a config naming ...ForSequenceClassification
     * adds its head) */
    {"FacebookAI/roberta-base", "roberta-base",
     ENCODER("roberta-base", "roberta", GM_ARCH_ROBERTA, 768, 12, 12, 3072, 50265, 514, 1, true)},
    {"FacebookAI/roberta-large", "roberta-large",
     ENCODER("roberta-large", "roberta", GM_ARCH_ROBERTA, 1024, 24, 16, 4096, 50265, 514, 1, true)},
    {"FacebookAI/xlm-roberta-base", "xlm-roberta-base xlmr-base",
     ENCODER("xlm-roberta-base", "xlm-roberta", GM_ARCH_XLM_ROBERTA, 768, 12, 12, 3072, 250002, 514,
             1, true)},
    {"FacebookAI/xlm-roberta-large", "xlm-roberta-large xlmr-large",
     ENCODER("xlm-roberta-large", "xlm-roberta", GM_ARCH_XLM_ROBERTA, 1024, 24, 16, 4096, 250002,
             514, 1, true)},
    {"distilbert/distilbert-base-uncased", "distilbert-base-uncased distilbert",
     ENCODER("distilbert-base-uncased", "distilbert", GM_ARCH_DISTILBERT, 768, 6, 12, 3072, 30522,
             512, 0, false)},
    {"microsoft/deberta-v3-base", "deberta-v3-base",
     DEBERTA3("deberta-v3-base", 768, 12, 12, 3072)},
    {"microsoft/deberta-v3-large", "deberta-v3-large",
     DEBERTA3("deberta-v3-large", 1024, 24, 16, 4096)},
    {"answerdotai/ModernBERT-base", "modernbert-base",
     MODERNBERT("ModernBERT-base", 768, 22, 12, 1152)},
    {"answerdotai/ModernBERT-large", "modernbert-large",
     MODERNBERT("ModernBERT-large", 1024, 28, 16, 2624)},
    /* Encoder-decoders */
    {"google-t5/t5-small", "t5-small", T5("t5-small", 512, 64, 8, 2048, 6, false, F32)},
    {"google-t5/t5-base", "t5-base", T5("t5-base", 768, 64, 12, 3072, 12, false, F32)},
    {"google-t5/t5-large", "t5-large", T5("t5-large", 1024, 64, 16, 4096, 24, false, F32)},
    {"google-t5/t5-3b", "t5-3b", T5("t5-3b", 1024, 128, 32, 16384, 24, false, F32)},
    {"google/flan-t5-small", "flan-t5-small", T5("flan-t5-small", 512, 64, 6, 1024, 8, true, F32)},
    {"google/flan-t5-base", "flan-t5-base", T5("flan-t5-base", 768, 64, 12, 2048, 12, true, F32)},
    {"google/flan-t5-large", "flan-t5-large",
     T5("flan-t5-large", 1024, 64, 16, 2816, 24, true, F32)},
    {"google/flan-t5-xl", "flan-t5-xl", T5("flan-t5-xl", 2048, 64, 32, 5120, 24, true, F32)},
    {"google/flan-t5-xxl", "flan-t5-xxl", T5("flan-t5-xxl", 4096, 64, 64, 10240, 24, true, F32)},
    {"facebook/bart-base", "bart-base", BART("bart-base", 768, 6, 12, 3072)},
    {"facebook/bart-large", "bart-large", BART("bart-large", 1024, 12, 16, 4096)},
    /* Decoders */
    {"bigcode/gpt_bigcode-santacoder", "santacoder gpt_bigcode-santacoder",
     BIGCODE("gpt_bigcode-santacoder", 2048, 24, 16, 49280, 2048)},
    {"bigcode/starcoderbase-1b", "starcoderbase-1b",
     BIGCODE("starcoderbase-1b", 2048, 24, 16, 49152, 8192)},
    {"bigcode/starcoder", "starcoder starcoderbase",
     BIGCODE("starcoder", 6144, 40, 48, 49152, 8192)},
    {"bigcode/starcoder2-3b", "starcoder2-3b",
     STARCODER2("starcoder2-3b", 3072, 30, 24, 2, 12288, true)},
    {"bigcode/starcoder2-7b", "starcoder2-7b",
     STARCODER2("starcoder2-7b", 4608, 32, 36, 4, 18432, true)},
    {"bigcode/starcoder2-15b", "starcoder2-15b",
     STARCODER2("starcoder2-15b", 6144, 40, 48, 4, 24576, false)},
    {"tiiuae/falcon-rw-1b", "falcon-rw-1b",
     FALCON("falcon-rw-1b", 2048, 24, 32, 32, 2, true, 50304)},
    {"tiiuae/falcon-7b", "falcon-7b", FALCON("falcon-7b", 4544, 32, 71, 1, 1, false, 65024)},
    {"tiiuae/falcon-40b", "falcon-40b", FALCON("falcon-40b", 8192, 60, 128, 8, 2, false, 65024)},
    {"tiiuae/falcon-180B", "falcon-180b",
     FALCON("falcon-180B", 14848, 80, 232, 8, 2, false, 65024)},
    {"CohereForAI/c4ai-command-r-v01",
     "command-r c4ai-command-r-v01",
     {BASE("c4ai-command-r-v01", "cohere", GM_ARCH_COHERE, 8192, 40, 64, 64, 128, 22528, 256000,
           131072),
      .head = GM_HEAD_CAUSAL_LM, .final_norm = true, .norms_per_layer = 1,
      .norm = GM_NORM_LAYER_NOBIAS, .act = GM_ACT_SILU, .gated_mlp = true, .tied_embeddings = true,
      .dtype = F16}},
    {"google/gemma-3-270m", "gemma-3-270m gemma3-270m",
     GEMMA3("gemma-3-270m", 640, 18, 4, 1, 256, 2048, 262144, 32768, 512)},
    {"google/gemma-3-1b-pt", "gemma-3-1b gemma3-1b gemma-3-1b-it",
     GEMMA3("gemma-3-1b-pt", 1152, 26, 4, 1, 256, 6912, 262144, 32768, 512)},
    {"google/gemma-3-4b-pt", "gemma-3-4b gemma3-4b gemma-3-4b-it",
     GEMMA3("gemma-3-4b-pt", 2560, 34, 8, 4, 256, 10240, 262208, 131072, 1024)},
    {"google/gemma-3-12b-pt", "gemma-3-12b gemma3-12b gemma-3-12b-it",
     GEMMA3("gemma-3-12b-pt", 3840, 48, 16, 8, 256, 15360, 262208, 131072, 1024)},
    {"google/gemma-3-27b-pt", "gemma-3-27b gemma3-27b gemma-3-27b-it",
     GEMMA3("gemma-3-27b-pt", 5376, 62, 32, 16, 128, 21504, 262208, 131072, 1024)},
    {"allenai/OLMo-1B-hf",
     "olmo-1b",
     {BASE("OLMo-1B-hf", "olmo", GM_ARCH_OLMO, 2048, 16, 16, 16, 128, 8192, 50304, 2048), STD,
      .norm = GM_NORM_PARAMFREE, .act = GM_ACT_SILU, .gated_mlp = true, .tied_embeddings = true,
      .dtype = F32}},
    {"allenai/OLMo-7B-hf",
     "olmo-7b",
     {BASE("OLMo-7B-hf", "olmo", GM_ARCH_OLMO, 4096, 32, 32, 32, 128, 11008, 50304, 2048), STD,
      .norm = GM_NORM_PARAMFREE, .act = GM_ACT_SILU, .gated_mlp = true, .dtype = F32}},
    {"allenai/OLMo-2-1124-7B",
     "olmo-2-7b olmo2-7b",
     {BASE("OLMo-2-1124-7B", "olmo2", GM_ARCH_OLMO2, 4096, 32, 32, 32, 128, 11008, 100352, 4096),
      STD, .norm = GM_NORM_RMS, .act = GM_ACT_SILU, .gated_mlp = true, .qk_norm_full = true,
      .post_norms = true, .dtype = F32}},
    {"allenai/OLMo-2-1124-13B",
     "olmo-2-13b olmo2-13b",
     {BASE("OLMo-2-1124-13B", "olmo2", GM_ARCH_OLMO2, 5120, 40, 40, 40, 128, 13824, 100352, 4096),
      STD, .norm = GM_NORM_RMS, .act = GM_ACT_SILU, .gated_mlp = true, .qk_norm_full = true,
      .post_norms = true, .dtype = F32}},
    {"mistralai/Mixtral-8x22B-v0.1",
     "mixtral-8x22b mixtral-8x22b-v0.1",
     {BASE("Mixtral-8x22B-v0.1", "mixtral", GM_ARCH_MIXTRAL, 6144, 56, 48, 8, 128, 16384, 32000,
           65536),
      STD, .norm = GM_NORM_RMS, .act = GM_ACT_SILU, .gated_mlp = true, .n_experts = 8,
      .n_experts_active = 2, .dtype = BF16}},
    {"Qwen/Qwen1.5-MoE-A2.7B",
     "qwen1.5-moe-a2.7b qwen2-moe",
     {BASE("Qwen1.5-MoE-A2.7B", "qwen2_moe", GM_ARCH_QWEN2_MOE, 2048, 24, 16, 16, 128, 5632, 151936,
           8192),
      STD, .norm = GM_NORM_RMS, .act = GM_ACT_SILU, .gated_mlp = true, .qkv_bias = true,
      .n_experts = 60, .n_experts_active = 4, .moe_intermediate = 1408, .shared_intermediate = 5632,
      .shared_expert_gate = true, .dtype = BF16}},
    {"Qwen/Qwen3-30B-A3B",
     "qwen3-30b-a3b",
     {BASE("Qwen3-30B-A3B", "qwen3_moe", GM_ARCH_QWEN3_MOE, 2048, 48, 32, 4, 128, 6144, 151936,
           40960),
      STD, .norm = GM_NORM_RMS, .act = GM_ACT_SILU, .gated_mlp = true, .qk_norm = true,
      .n_experts = 128, .n_experts_active = 8, .moe_intermediate = 768, .dtype = BF16}},
    {"Qwen/Qwen3-235B-A22B",
     "qwen3-235b-a22b",
     {BASE("Qwen3-235B-A22B", "qwen3_moe", GM_ARCH_QWEN3_MOE, 4096, 94, 64, 4, 128, 12288, 151936,
           40960),
      STD, .norm = GM_NORM_RMS, .act = GM_ACT_SILU, .gated_mlp = true, .qk_norm = true,
      .n_experts = 128, .n_experts_active = 8, .moe_intermediate = 1536, .dtype = BF16}},
    {"deepseek-ai/DeepSeek-V2-Lite", "deepseek-v2-lite",
     DEEPSEEK("DeepSeek-V2-Lite", "deepseek_v2", GM_ARCH_DEEPSEEK_V2, 2048, 27, 16, 0, 10944, 1408,
              64, 2, 6, 1, 102400, 163840, false, NO_QUANT)},
    {"deepseek-ai/DeepSeek-V2", "deepseek-v2",
     DEEPSEEK("DeepSeek-V2", "deepseek_v2", GM_ARCH_DEEPSEEK_V2, 5120, 60, 128, 1536, 12288, 1536,
              160, 2, 6, 1, 102400, 163840, false, NO_QUANT)},
    {"deepseek-ai/DeepSeek-V3", "deepseek-v3 deepseek-r1",
     DEEPSEEK("DeepSeek-V3", "deepseek_v3", GM_ARCH_DEEPSEEK_V3, 7168, 61, 128, 1536, 18432, 2048,
              256, 1, 8, 3, 129280, 163840, true, FP8_BLOCK128)},
    {"deepseek-ai/DeepSeek-V3.2-Exp", "deepseek-v3.2-exp deepseek-v3.2 deepseek-ai/DeepSeek-V3.2",
     DEEPSEEK_V32("DeepSeek-V3.2-Exp")},
    /* vision-language models: the language model with its tower and projector */
    {"llava-hf/llava-1.5-7b-hf",
     "llava-1.5-7b llava-v1.5-7b liuhaotian/llava-v1.5-7b",
     {BASE("llava-1.5-7b-hf", "llama", GM_ARCH_LLAMA, 4096, 32, 32, 32, 128, 11008, 32064, 4096),
      STD, .norm = GM_NORM_RMS, .act = GM_ACT_SILU, .gated_mlp = true, .dtype = F16,
      .vision = {.kind = GM_VISION_CLIP,
                 .hidden = 1024,
                 .layers = 24,
                 .heads = 16,
                 .intermediate = 4096,
                 .patch = 14,
                 .image_size = 336}}},
    {"Qwen/Qwen2.5-VL-7B-Instruct",
     "qwen2.5-vl-7b qwen2.5-vl-7b-instruct",
     {BASE("Qwen2.5-VL-7B-Instruct", "qwen2_5_vl", GM_ARCH_QWEN2, 3584, 28, 28, 4, 128, 18944,
           152064, 128000),
      STD, .norm = GM_NORM_RMS, .act = GM_ACT_SILU, .gated_mlp = true, .qkv_bias = true,
      .dtype = BF16,
      .vision = {.kind = GM_VISION_QWEN_VL,
                 .hidden = 1280,
                 .layers = 32,
                 .heads = 16,
                 .intermediate = 3420,
                 .patch = 14,
                 .merge = 2,
                 .temporal = 2,
                 .gated_mlp = true,
                 .rms_norm = true}}},
    {"Qwen/Qwen3-Next-80B-A3B-Instruct",
     "qwen3-next-80b-a3b qwen3-next-80b-a3b-thinking "
     "Qwen/Qwen3-Next-80B-A3B-Thinking",
     {BASE("Qwen3-Next-80B-A3B-Instruct", "qwen3_next", GM_ARCH_QWEN3_NEXT, 2048, 48, 16, 2, 256,
           5120, 151936, 262144),
      STD, .norm = GM_NORM_RMS, .act = GM_ACT_SILU, .gated_mlp = true, .qk_norm = true,
      .attn_output_gate = true, .n_experts = 512, .n_experts_active = 10, .moe_intermediate = 512,
      .shared_intermediate = 512, .shared_expert_gate = true, .n_linear_layers = 36,
      .lin_k_heads = 16, .lin_v_heads = 32, .lin_k_dim = 128, .lin_v_dim = 128,
      .lin_conv_kernel = 4, .dtype = BF16}},
    {"ai21labs/Jamba-v0.1",
     "jamba-v0.1 jamba",
     {BASE("Jamba-v0.1", "jamba", GM_ARCH_JAMBA, 4096, 32, 32, 8, 128, 14336, 65536, 262144), STD,
      .norm = GM_NORM_RMS, .act = GM_ACT_SILU, .gated_mlp = true, .n_experts = 16,
      .n_experts_active = 2, .n_dense_layers = 16, .n_linear_layers = 28, .lin_conv_kernel = 4,
      .mamba_d_state = 16, .mamba_d_inner = 8192, .mamba_dt_rank = 256, .dtype = BF16}},
    /* Mamba-2 hybrids.  Nemotron-H-8B: nvidia/Nemotron-H-8B-Base-8K config.json
     * (transformers_version 4.48.0.dev0; hybrid_override_pattern of 24 'M', 4 '*', 24 '-').
     * Falcon-H1-7B: transformers' model_doc/falcon_h1.md table (44 layers, 3072 wide, 12 heads
     * / 2 KV, 24 Mamba heads of 128, d_state 256) with the config's vocab 130048,
     * intermediate 12288, mamba_d_ssm 3072, one group, untied embeddings; mamba_rms_norm at
     * FalconH1Config's default (false). */
    {"nvidia/Nemotron-H-8B-Base-8K",
     "nemotron-h-8b nemotron-h-8b-base-8k nvidia/Nemotron-H-8B-Reasoning-128K",
     {BASE("Nemotron-H-8B-Base-8K", "nemotron_h", GM_ARCH_NEMOTRON_H, 4096, 52, 32, 8, 128, 21504,
           131072, 8192),
      .head = GM_HEAD_CAUSAL_LM, .final_norm = true, .norms_per_layer = 1, .norm = GM_NORM_RMS,
      .act = GM_ACT_RELU, .mix = GM_MIX_PATTERN, .n_linear_layers = 24, .n_attn_layers = 4,
      .n_mlp_layers = 24, .lin_conv_kernel = 4, .mamba_d_state = 128, .mamba_d_inner = 8192,
      .mamba_heads = 128, .mamba_groups = 8, .mamba_gated_norm = true, .dtype = BF16}},
    {"tiiuae/Falcon-H1-7B-Base",
     "falcon-h1-7b falcon-h1-7b-base tiiuae/Falcon-H1-7B-Instruct",
     {BASE("Falcon-H1-7B-Base", "falcon_h1", GM_ARCH_FALCON_H1, 3072, 44, 12, 2, 128, 12288, 130048,
           262144),
      STD, .norm = GM_NORM_RMS, .act = GM_ACT_SILU, .gated_mlp = true, .mix = GM_MIX_PARALLEL,
      .n_linear_layers = 44, .lin_conv_kernel = 4, .mamba_d_state = 256, .mamba_d_inner = 3072,
      .mamba_heads = 24, .mamba_groups = 1, .dtype = BF16}},
    {"openai/gpt-oss-20b", "gpt-oss-20b gpt-oss:20b", GPT_OSS("gpt-oss-20b", 24, 32)},
    {"openai/gpt-oss-120b", "gpt-oss-120b gpt-oss:120b", GPT_OSS("gpt-oss-120b", 36, 128)},
    {"meta-llama/Llama-4-Scout-17B-16E", "llama-4-scout llama-4-scout-17b-16e llama4-scout",
     LLAMA4("Llama-4-Scout-17B-16E", 16, 0, 10485760)},
    {"meta-llama/Llama-4-Maverick-17B-128E",
     "llama-4-maverick llama-4-maverick-17b-128e "
     "llama4-maverick",
     LLAMA4("Llama-4-Maverick-17B-128E", 128, 24, 1048576)},
    /* Models of the public vLLM start-up logs (tests/data/validation), each from its published
     * config.json: microsoft/phi-4 (Phi3ForCausalLM: 40 heads, 10 KV heads, untied, no
     * sliding window), deepseek-ai/deepseek-coder-6.7b-instruct (LlamaForCausalLM, 32 KV heads,
     * max_position_embeddings 16384 with rope_scaling {"type": "linear", "factor": 4.0}),
     * mistralai/Mistral-7B-Instruct-v0.2 (Mistral-7B-v0.1's layout without its sliding window,
     * 32768 positions) and moonshotai/Kimi-K2-Thinking (DeepseekV3's layout with 64 heads, 384
     * experts, one dense layer, a 163840 vocabulary). */
    {"microsoft/phi-4", "phi-4 phi4",
     LLAMA_LIKE("phi-4", "phi3", GM_ARCH_PHI3, 5120, 40, 40, 10, 128, 17920, 100352, 16384, false,
                BF16)},
    {"deepseek-ai/deepseek-coder-6.7b-instruct",
     "deepseek-coder-6.7b deepseek-coder-6.7b-base deepseek-ai/deepseek-coder-6.7b-base",
     {BASE("deepseek-coder-6.7b-instruct", "llama", GM_ARCH_LLAMA, 4096, 32, 32, 32, 128, 11008,
           32256, 16384),
      STD, .norm = GM_NORM_RMS, .act = GM_ACT_SILU, .gated_mlp = true, .dtype = BF16,
      .rope_scaling = GM_ROPE_LINEAR, .rope_factor = 4.0}},
    {"mistralai/Mistral-7B-Instruct-v0.2", "mistral-7b-instruct-v0.2 mistral-7b-v0.2",
     LLAMA_LIKE("Mistral-7B-Instruct-v0.2", "mistral", GM_ARCH_MISTRAL, 4096, 32, 32, 8, 128, 14336,
                32000, 32768, false, BF16)},
    {"moonshotai/Kimi-K2-Thinking", "kimi-k2-thinking kimi-k2",
     DEEPSEEK("Kimi-K2-Thinking", "kimi_k2", GM_ARCH_DEEPSEEK_V3, 7168, 61, 64, 1536, 18432, 2048,
              384, 1, 8, 1, 163840, 262144, true, INT4_GROUP32_EXPERTS)},
};

#define N_CATALOG (sizeof(catalog) / sizeof(catalog[0]))

size_t gm_model_catalog_count(void)
{
    return N_CATALOG;
}

const struct gm_model *gm_model_catalog_get(size_t i)
{
    return i < N_CATALOG ? &catalog[i].m : NULL;
}

const char *gm_model_catalog_hub_id(size_t i)
{
    return i < N_CATALOG ? catalog[i].hub_id : NULL;
}

const char *gm_model_catalog_aliases(size_t i)
{
    return i < N_CATALOG && catalog[i].aliases ? catalog[i].aliases : "";
}

static bool alias_match(const char *aliases, const char *name)
{
    size_t n = strlen(name);
    const char *p = aliases;
    while (*p) {
        const char *e = strchr(p, ' ');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == n && !strncasecmp(p, name, n))
            return true;
        if (!e)
            break;
        p = e + 1;
    }
    return false;
}

static ptrdiff_t find_index(const char *name)
{
    const char *slash;
    if (!name || !*name)
        return -1;
    slash = strrchr(name, '/');
    for (size_t i = 0; i < N_CATALOG; i++) {
        const struct entry *e = &catalog[i];
        if (!strcasecmp(name, e->hub_id) || !strcasecmp(name, e->m.name) ||
            alias_match(e->aliases, name))
            return (ptrdiff_t)i;
    }
    /* "someorg/Llama-2-7b-hf": match on the last component. */
    if (slash && slash[1])
        for (size_t i = 0; i < N_CATALOG; i++)
            if (!strcasecmp(slash + 1, catalog[i].m.name) ||
                alias_match(catalog[i].aliases, slash + 1))
                return (ptrdiff_t)i;
    return -1;
}

const struct gm_model *gm_model_catalog_find(const char *name)
{
    ptrdiff_t i = find_index(name);
    return i < 0 ? NULL : &catalog[i].m;
}

static ptrdiff_t kin_index(const char *name)
{
    const char *slash = strrchr(name, '/');
    for (size_t k = 0; k < sizeof kin_models / sizeof kin_models[0]; k++)
        if (alias_match(kin_models[k].kin, name) ||
            (slash && slash[1] && alias_match(kin_models[k].kin, slash + 1)))
            return find_index(kin_models[k].hub_id);
    return -1;
}

/* 'name' without its variant words (dash-separated, any case) into out[n]; false when it
 * has none. */
static bool drop_variant_words(const char *name, char *out, size_t n)
{
    size_t len = 0;
    bool dropped = false;
    const char *p = name;
    while (*p) {
        size_t w = strcspn(p, "-");
        bool variant = false;
        for (size_t k = 0; k < sizeof variant_words / sizeof variant_words[0]; k++)
            variant = variant || (strlen(variant_words[k]) == w &&
                                  !strncasecmp(p, variant_words[k], w) && p != name);
        if (variant) {
            dropped = true;
        } else {
            if (len + w + 2 > n)
                return false;
            if (len)
                out[len++] = '-';
            memcpy(out + len, p, w);
            len += w;
        }
        p += w + (p[w] == '-');
    }
    out[len] = '\0';
    return dropped;
}

const struct gm_model *gm_model_catalog_match(const char *name, size_t *index, bool *kin)
{
    ptrdiff_t i = find_index(name);
    char base[256];
    bool other = false;
    if (i < 0 && name) {
        other = true;
        i = kin_index(name);
        if (i < 0 && drop_variant_words(name, base, sizeof base)) {
            i = find_index(base);
            if (i < 0)
                i = kin_index(base);
        }
    }
    if (i < 0)
        return NULL;
    if (index)
        *index = (size_t)i;
    if (kin)
        *kin = other;
    return &catalog[i].m;
}

const char *gm_model_catalog_closest(const char *name)
{
    const char *names[2 * N_CATALOG], *slash;
    const char *hit;
    if (!name)
        return NULL;
    for (size_t i = 0; i < N_CATALOG; i++) {
        names[i] = catalog[i].m.name;
        names[N_CATALOG + i] = catalog[i].hub_id;
    }
    hit = gm_text_closest(name, strlen(name), names, 2 * N_CATALOG, true);
    slash = strrchr(name, '/');
    if (!hit && slash && slash[1])
        hit = gm_text_closest(slash + 1, strlen(slash + 1), names, N_CATALOG, true);
    return hit;
}

/* The last component of [path, end), trailing slashes dropped. */
static const char *last_component(const char *path, const char **end)
{
    const char *e = *end, *start;
    while (e > path + 1 && e[-1] == '/')
        e--;
    start = e;
    while (start > path && start[-1] != '/')
        start--;
    *end = e;
    return start;
}

void gm_model_name_from_path(struct gm_model *m, const char *path)
{
    const char *end = path + strlen(path), *start;
    if (m->name[0])
        return;
    start = last_component(path, &end);
    /* ".../m/config.json" is better known by its folder */
    if ((size_t)(end - start) == strlen("config.json") && !strncmp(start, "config.json", 11) &&
        start > path) {
        const char *pend = start - 1, *pstart = last_component(path, &pend);
        size_t n = (size_t)(pend - pstart);
        if (n && !(n == 1 && *pstart == '.') && !(n == 2 && !strncmp(pstart, "..", 2)) &&
            *pstart != '/') {
            start = pstart;
            end = pend;
        }
    }
    snprintf(m->name, sizeof(m->name), "%.*s", (int)(end - start), start);
}
