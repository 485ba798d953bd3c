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

#include "gpumem/error.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

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
    GM_NORM_RMS,  /* weight only */
    GM_NORM_LAYER /* weight and bias */
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
    GM_HEAD_ENCODER        /* encoder with pooler, no vocabulary head (BertModel) */
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
    double attn_dropout;        /* dropout on attention probabilities */
    double hidden_dropout;      /* dropout on residual branches */
    enum gm_dtype dtype;        /* torch_dtype of the published weights */
    uint64_t n_params_file;     /* exact count from tensor headers, 0 = unknown */
    uint64_t weight_bytes_file; /* bytes of the weights in a file, 0 = unknown */
    bool qk_norm;               /* RMSNorm (head_dim weights) on q and k (qwen3) */
};

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
};

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
 * fields), GM_ERR_UNSUPPORTED for a model_type gpumem cannot count. */
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

/* A model from a catalog name or a path (file or directory).  A name that is neither a
 * catalog entry nor an existing path gives GM_ERR_NOENT with a hint. */
enum gm_status gm_model_resolve(const char *spec, struct gm_model *out, struct gm_error *err);

/* Name 'm' after 'path' when it has no name yet: a folder by its name, a config file by its
 * own name ("gpt2.json"), ".../m/config.json" by its folder "m". */
void gm_model_name_from_path(struct gm_model *m, const char *path);

/* The architectures gpumem knows, as their model_type names ("llama, mistral, ..."),
 * written to 'out' (n bytes, always terminated). */
void gm_arch_known_list(char *out, size_t n);

/* Names: "llama", "bf16", ...; static storage, "unknown" for out-of-range values. */
const char *gm_arch_name(enum gm_arch a);
const char *gm_dtype_name(enum gm_dtype t);
/* Parse a dtype name as HF/torch/safetensors spell it ("bfloat16", "bf16", "BF16",
 * "float32", "F32", "fp8", ...).  GM_DTYPE_UNKNOWN when not recognised. */
enum gm_dtype gm_dtype_parse(const char *s);
/* Bits per element (4 for INT4/NF4, 8 for FP8, ...); 0 for UNKNOWN. */
unsigned gm_dtype_bits(enum gm_dtype t);

#ifdef __cplusplus
}
#endif
#endif
