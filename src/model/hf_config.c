/* SPDX-License-Identifier: MIT */
/* hf_config.c - read a Hugging Face config.json into struct gm_model (jansson).
 *
 * Input: one JSON object.  The keys read depend on model_type (or, when it is absent, on
 * the first entry of "architectures"):
 *   common     hidden_size num_hidden_layers num_attention_heads num_key_value_heads
 *              head_dim intermediate_size vocab_size max_position_embeddings
 *              tie_word_embeddings torch_dtype|dtype sliding_window attention_dropout
 *              rope_scaling {rope_type|type, factor, original_max_position_embeddings}, or
 *              rope_parameters (transformers v5) flat or per layer type
 *   gpt2       n_embd n_layer n_head n_inner (null: 4*n_embd) n_positions attn_pdrop resid_pdrop
 *   gpt_bigcode  the gpt2 keys + multi_query (one KV head)
 *   bert, roberta, xlm-roberta  type_vocab_size hidden_dropout_prob
 *              attention_probs_dropout_prob; id2label for a ...ForSequenceClassification
 *   distilbert dim n_layers n_heads hidden_dim sinusoidal_pos_embds dropout attention_dropout
 *   deberta-v2 position_biased_input position_buckets max_relative_positions
 *   modernbert norm_bias attention_bias mlp_bias
 *   t5         d_model num_layers num_decoder_layers num_heads d_kv d_ff feed_forward_proj
 *              relative_attention_num_buckets
 *   bart       d_model encoder_layers decoder_layers encoder_attention_heads
 *              encoder_ffn_dim (the decoder's must be equal)
 *   falcon     num_kv_heads new_decoder_architecture multi_query parallel_attn bias
 *              num_ln_in_parallel_attn ffn_hidden_size (older: n_embed n_layer n_head)
 *   cohere     use_qk_norm; gemma2 attn_logit_softcapping final_logit_softcapping;
 *   gemma3     sliding_window_pattern or layer_types; starcoder2 use_bias
 *   qwen2/3    use_sliding_window max_window_layers (qwen3: q_norm/k_norm always present)
 *   mixtral    num_local_experts num_experts_per_tok
 *   qwen2_moe, qwen3_moe  num_experts num_experts_per_tok moe_intermediate_size
 *              shared_expert_intermediate_size decoder_sparse_step mlp_only_layers
 *   qwen3_next the qwen2_moe keys + layer_types full_attention_interval linear_num_key_heads
 *              linear_num_value_heads linear_key_head_dim linear_value_head_dim
 *              linear_conv_kernel_dim
 *   nemotron_h hybrid_override_pattern|layers_block_type mamba_num_heads mamba_head_dim
 *              ssm_state_size n_groups|mamba_n_groups conv_kernel|mamba_d_conv
 *              attention_head_dim
 *   falcon_h1  mamba_d_ssm mamba_expand mamba_n_heads mamba_n_groups mamba_d_state
 *              mamba_d_conv mamba_rms_norm
 *   gpt_oss    num_local_experts num_experts_per_tok|experts_per_token layer_types
 *   llama4, llama4_text  intermediate_size (experts) intermediate_size_mlp (dense layers)
 *              num_local_experts num_experts_per_tok interleave_moe_layer_step moe_layers
 *              attention_chunk_size no_rope_layers no_rope_layer_interval
 *   deepseek_v2/v3  q_lora_rank kv_lora_rank qk_nope_head_dim qk_rope_head_dim v_head_dim
 *              moe_intermediate_size n_routed_experts n_shared_experts num_experts_per_tok
 *              first_k_dense_replace moe_layer_freq topk_method; deepseek_v32 also
 *              index_n_heads index_head_dim index_topk
 *   quantization_config (top level): quant_method gptq / awq / bitsandbytes / fp8 /
 *              fbgemm_fp8 / mxfp4 / modelopt (FP8, NVFP4) / compressed-tensors with their bits,
 * group sizes and the modules they leave alone A config whose top level has no hidden size but a
 * "text_config" object is read from that object (multimodal wrappers); its model_type falls back to
 * the wrapper's. Integers must be non-negative whole numbers (a real with an integral value is
 * accepted); null counts as absent.  Unknown model types are read with the common keys and marked
 * GM_ARCH_UNKNOWN, so the caller can still use them with an explicit parameter count. */
#include "gpumem/model.h"
#include "gpumem/text.h"
#include "gpumem/units.h"

#include "base/buf.h"
#include "base/json_load.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#define CONFIG_MAX_BYTES ((size_t)16 << 20)

struct reader {
    json_t *root;
    json_t *top; /* the whole document (quantization_config, a wrapper's model_type) */
    char missing[200];
    struct gm_error *err;
    enum gm_status st;
};

static void add_missing(struct reader *r, const char *key)
{
    size_t n = strlen(r->missing);
    snprintf(r->missing + n, sizeof(r->missing) - n, "%s%s", n ? ", " : "", key);
}

/* Read a non-negative integer field.  Returns true when present; a wrong type sets r->st. */
static bool get_u64(struct reader *r, const char *key, uint64_t *out)
{
    json_t *v = json_object_get(r->root, key);
    if (!v || json_is_null(v) || r->st != GM_OK)
        return false;
    if (json_is_integer(v)) {
        json_int_t i = json_integer_value(v);
        if (i < 0) {
            r->st = gm_fail(r->err, GM_ERR_FORMAT, GM_NO_OFFSET, "'%s' is negative (%lld)", key,
                            (long long)i);
            return false;
        }
        *out = (uint64_t)i;
        return true;
    }
    if (json_is_real(v)) {
        double d = json_real_value(v);
        if (d >= 0 && d < 9.0e15 && floor(d) == d) {
            *out = (uint64_t)d;
            return true;
        }
    }
    r->st = gm_fail(r->err, GM_ERR_FORMAT, GM_NO_OFFSET, "'%s' must be a non-negative whole number",
                    key);
    return false;
}

/* A count that must be at least 1 when given: 0 is an error of its own, never "missing". */
static bool get_count(struct reader *r, const char *key, uint64_t *out)
{
    uint64_t v;
    if (!get_u64(r, key, &v))
        return false;
    if (v == 0) {
        r->st =
            gm_fail(r->err, GM_ERR_FORMAT, GM_NO_OFFSET, "'%s' is 0: it must be at least 1", key);
        return false;
    }
    *out = v;
    return true;
}

static uint64_t need_u64(struct reader *r, const char *key)
{
    uint64_t v = 0;
    if (!get_count(r, key, &v) && r->st == GM_OK)
        add_missing(r, key);
    return v;
}

static bool get_bool(struct reader *r, const char *key, bool dflt)
{
    json_t *v = json_object_get(r->root, key);
    if (!v || json_is_null(v))
        return dflt;
    if (json_is_boolean(v))
        return json_is_true(v);
    if (r->st == GM_OK)
        r->st = gm_fail(r->err, GM_ERR_FORMAT, GM_NO_OFFSET, "'%s' must be true or false", key);
    return dflt;
}

static double get_double(struct reader *r, const char *key, double dflt)
{
    json_t *v = json_object_get(r->root, key);
    if (!v || json_is_null(v))
        return dflt;
    if (json_is_number(v)) {
        double d = json_number_value(v);
        if (d >= 0 && d <= 1)
            return d;
    }
    if (r->st == GM_OK)
        r->st = gm_fail(r->err, GM_ERR_FORMAT, GM_NO_OFFSET,
                        "'%s' must be a probability between 0 and 1", key);
    return dflt;
}

/* A non-negative real number (soft-capping values); null or absent gives 'dflt'. */
static double get_real(struct reader *r, const char *key, double dflt)
{
    json_t *v = json_object_get(r->root, key);
    if (!v || json_is_null(v))
        return dflt;
    if (json_is_number(v) && json_number_value(v) >= 0 && json_number_value(v) < 1e9)
        return json_number_value(v);
    if (r->st == GM_OK)
        r->st =
            gm_fail(r->err, GM_ERR_FORMAT, GM_NO_OFFSET, "'%s' must be a non-negative number", key);
    return dflt;
}

/* The first of counts 'a', 'b' present (b may be NULL); 0 is an error, as in get_count(). */
static bool get_count_either(struct reader *r, const char *a, const char *b, uint64_t *out)
{
    return get_count(r, a, out) || (b && r->st == GM_OK && get_count(r, b, out));
}

/* A required field; 'dflt' (when not 0) is the config class's default, which
 * transformers leaves out of the JSON it saves (to_diff_dict). */
static uint64_t need_either(struct reader *r, const char *a, const char *b, uint64_t dflt)
{
    uint64_t v = 0;
    if (!get_count_either(r, a, b, &v) && r->st == GM_OK) {
        if (dflt)
            return dflt;
        add_missing(r, a);
    }
    return v;
}

static const char *get_str(struct reader *r, const char *key)
{
    json_t *v = json_object_get(r->root, key);
    return json_is_string(v) ? json_string_value(v) : NULL;
}

/* Names from the file are display text: kept with their control characters escaped
 * (gm_text_escape()), so that no renderer can send a file's terminal escapes raw. */
static void copy_str(char *dst, size_t n, const char *src)
{
    gm_text_escape(dst, n, src);
}

static enum gm_act parse_act(const char *s, enum gm_act dflt)
{
    if (!s)
        return dflt;
    if (!strcmp(s, "silu") || !strcmp(s, "swish"))
        return GM_ACT_SILU;
    if (!strcmp(s, "gelu_new") || !strcmp(s, "gelu_fast"))
        return GM_ACT_GELU_NEW;
    if (!strncmp(s, "gelu", 4))
        return GM_ACT_GELU;
    if (!strcmp(s, "relu"))
        return GM_ACT_RELU;
    return dflt;
}

static const struct {
    const char *model_type;
    const char *arch_prefix; /* "architectures" entry prefix */
    enum gm_arch arch;
} families[] = {
    {"llama4", "Llama4", GM_ARCH_LLAMA4}, /* before llama: "Llama4For..." starts "Llama" */
    {"llama4_text", "Llama4", GM_ARCH_LLAMA4},
    {"llama", "Llama", GM_ARCH_LLAMA},
    {"mistral", "Mistral", GM_ARCH_MISTRAL},
    {"mixtral", "Mixtral", GM_ARCH_MIXTRAL},
    {"qwen2", "Qwen2For", GM_ARCH_QWEN2},
    {"gemma3", "Gemma3", GM_ARCH_GEMMA3},
    {"gemma3_text", "Gemma3", GM_ARCH_GEMMA3},
    {"gemma2", "Gemma2", GM_ARCH_GEMMA2},
    {"gemma", "Gemma", GM_ARCH_GEMMA},
    {"phi3", "Phi3", GM_ARCH_PHI3},
    {"phi", "Phi", GM_ARCH_PHI},
    {"gpt2", "GPT2", GM_ARCH_GPT2},
    {"gpt_neox", "GPTNeoX", GM_ARCH_GPT_NEOX},
    {"bert", "Bert", GM_ARCH_BERT},
    {"qwen3", "Qwen3For", GM_ARCH_QWEN3},
    {"roberta", "Roberta", GM_ARCH_ROBERTA},
    {"xlm-roberta", "XLMRoberta", GM_ARCH_XLM_ROBERTA},
    {"distilbert", "DistilBert", GM_ARCH_DISTILBERT},
    {"deberta-v2", "DebertaV2", GM_ARCH_DEBERTA_V2},
    {"modernbert", "ModernBert", GM_ARCH_MODERNBERT},
    {"t5", "T5", GM_ARCH_T5},
    {"bart", "Bart", GM_ARCH_BART},
    {"gpt_bigcode", "GPTBigCode", GM_ARCH_GPT_BIGCODE},
    {"falcon_h1", "FalconH1", GM_ARCH_FALCON_H1}, /* before falcon: "FalconH1For..." */
    {"falcon", "Falcon", GM_ARCH_FALCON},
    {"RefinedWeb", "RW", GM_ARCH_FALCON},
    {"RefinedWebModel", "RW", GM_ARCH_FALCON},
    {"cohere", "Cohere", GM_ARCH_COHERE},
    {"starcoder2", "Starcoder2", GM_ARCH_STARCODER2},
    {"olmo2", "Olmo2", GM_ARCH_OLMO2},
    {"olmo", "Olmo", GM_ARCH_OLMO},
    {"qwen2_moe", "Qwen2Moe", GM_ARCH_QWEN2_MOE},
    {"qwen3_moe", "Qwen3Moe", GM_ARCH_QWEN3_MOE},
    {"qwen3_next", "Qwen3Next", GM_ARCH_QWEN3_NEXT},
    {"jamba", "Jamba", GM_ARCH_JAMBA},
    {"nemotron_h", "NemotronH", GM_ARCH_NEMOTRON_H},
    {"deepseek_v2", "DeepseekV2", GM_ARCH_DEEPSEEK_V2},
    {"deepseek_v32", "DeepseekV32", GM_ARCH_DEEPSEEK_V3}, /* V3 + the indexer */
    {"deepseek_v3", "DeepseekV3", GM_ARCH_DEEPSEEK_V3},
    {"gpt_oss", "GptOss", GM_ARCH_GPT_OSS},
    /* vision-language models: their language model's layout (the tower: read_vision()) */
    {"qwen2_5_vl", "Qwen2_5_VL", GM_ARCH_QWEN2},
    {"qwen2_5_vl_text", "Qwen2_5_VL", GM_ARCH_QWEN2},
    {"qwen2_vl", "Qwen2VL", GM_ARCH_QWEN2},
    {"qwen2_vl_text", "Qwen2VL", GM_ARCH_QWEN2},
};

static enum gm_arch arch_of_type(const char *model_type)
{
    for (size_t i = 0; i < sizeof(families) / sizeof(families[0]); i++)
        if (!strcmp(families[i].model_type, model_type))
            return families[i].arch;
    return GM_ARCH_UNKNOWN;
}

static enum gm_arch find_arch(const char *model_type, json_t *archs)
{
    size_t n = sizeof(families) / sizeof(families[0]);
    if (model_type)
        return arch_of_type(model_type);
    if (json_is_array(archs) && json_is_string(json_array_get(archs, 0))) {
        const char *a = json_string_value(json_array_get(archs, 0));
        for (size_t i = 0; i < n; i++)
            if (!strncmp(a, families[i].arch_prefix, strlen(families[i].arch_prefix)))
                return families[i].arch;
    }
    return GM_ARCH_UNKNOWN;
}

static bool is_encoder(enum gm_arch a)
{
    return a == GM_ARCH_BERT || a == GM_ARCH_ROBERTA || a == GM_ARCH_XLM_ROBERTA ||
           a == GM_ARCH_DISTILBERT || a == GM_ARCH_DEBERTA_V2 || a == GM_ARCH_MODERNBERT;
}

/* The per-family layout: which tensors exist and their defaults. */
static void set_layout(struct gm_model *m)
{
    m->norm = GM_NORM_RMS;
    m->norms_per_layer = 2;
    m->final_norm = true;
    m->gated_mlp = true;
    m->act = GM_ACT_SILU;
    if (is_encoder(m->arch)) {
        /* post-LN BERT family: LayerNorm, biases everywhere, GELU, embedding norm */
        m->norm = GM_NORM_LAYER;
        m->gated_mlp = false;
        m->final_norm = false;
        m->qkv_bias = m->out_bias = m->mlp_bias = true;
        m->act = GM_ACT_GELU;
        m->head = GM_HEAD_ENCODER;
        m->emb_norm = true;
    }
    switch (m->arch) {
    case GM_ARCH_QWEN2:
    case GM_ARCH_QWEN2_MOE:
        m->qkv_bias = true;
        break;
    case GM_ARCH_QWEN3:
    case GM_ARCH_QWEN3_MOE:
        m->qk_norm = true;
        break;
    case GM_ARCH_QWEN3_NEXT: /* Qwen3NextAttention: q_proj doubled for the output gate */
        m->qk_norm = true;
        m->attn_output_gate = true;
        break;
    case GM_ARCH_GEMMA:
    case GM_ARCH_GEMMA2:
    case GM_ARCH_GEMMA3:
        m->tied_embeddings = true;
        m->act = GM_ACT_GELU;
        if (m->arch != GM_ARCH_GEMMA)
            m->norms_per_layer = 4;
        m->qk_norm = m->arch == GM_ARCH_GEMMA3;
        break;
    case GM_ARCH_PHI:
        m->norm = GM_NORM_LAYER;
        m->norms_per_layer = 1;
        m->gated_mlp = false;
        m->qkv_bias = m->out_bias = m->mlp_bias = m->lm_head_bias = true;
        m->act = GM_ACT_GELU_NEW;
        break;
    case GM_ARCH_GPT2:
    case GM_ARCH_GPT_BIGCODE:
        m->norm = GM_NORM_LAYER;
        m->gated_mlp = false;
        m->qkv_bias = m->out_bias = m->mlp_bias = true;
        m->tied_embeddings = true;
        m->act = m->arch == GM_ARCH_GPT2 ? GM_ACT_GELU_NEW : GM_ACT_GELU;
        break;
    case GM_ARCH_GPT_NEOX:
    case GM_ARCH_STARCODER2:
        m->norm = GM_NORM_LAYER;
        m->gated_mlp = false;
        m->qkv_bias = m->out_bias = m->mlp_bias = true;
        m->act = GM_ACT_GELU;
        break;
    case GM_ARCH_BERT:
    case GM_ARCH_ROBERTA:
    case GM_ARCH_XLM_ROBERTA:
        m->pooler = true; /* BertModel / RobertaModel add_pooling_layer=True */
        break;
    case GM_ARCH_MODERNBERT:
        /* pre-norm, bias-free LayerNorm, fused Wqkv without bias, GeGLU */
        m->norm = GM_NORM_LAYER_NOBIAS;
        m->final_norm = true;
        m->gated_mlp = true;
        m->qkv_bias = m->out_bias = m->mlp_bias = false;
        m->no_first_attn_norm = true;
        break;
    case GM_ARCH_FALCON:
        m->norm = GM_NORM_LAYER;
        m->gated_mlp = false;
        m->act = GM_ACT_GELU;
        m->tied_embeddings = true;
        break;
    case GM_ARCH_NEMOTRON_H: /* NemotronHBlock: one RMSNorm, then one mixer; relu2 MLP */
        m->norms_per_layer = 1;
        m->gated_mlp = false;
        m->act = GM_ACT_RELU; /* mlp_hidden_act relu2: relu, then its square */
        m->mix = GM_MIX_PATTERN;
        m->mamba_gated_norm = true;
        break;
    case GM_ARCH_FALCON_H1: /* FalconH1DecoderLayer: attention + Mamba-2, then SwiGLU */
        m->mix = GM_MIX_PARALLEL;
        break;
    case GM_ARCH_COHERE:
        m->norm = GM_NORM_LAYER_NOBIAS;
        m->norms_per_layer = 1; /* parallel attention and MLP */
        m->tied_embeddings = true;
        break;
    case GM_ARCH_OLMO:
        m->norm = GM_NORM_PARAMFREE;
        break;
    case GM_ARCH_OLMO2:
        m->qk_norm_full = true;
        m->post_norms = true;
        break;
    case GM_ARCH_GPT_OSS:
        /* GptOssConfig sets attention_bias True; the experts carry gate_up/down biases, the
         * router a Linear bias, each attention layer one sink logit per head */
        m->qkv_bias = m->out_bias = m->mlp_bias = true;
        m->router_bias = true;
        m->attn_sinks = true;
        break;
    case GM_ARCH_T5:
        m->head = GM_HEAD_SEQ2SEQ_LM;
        m->gated_mlp = false;
        m->act = GM_ACT_RELU;
        m->tied_embeddings = true;
        break;
    case GM_ARCH_BART:
        m->head = GM_HEAD_SEQ2SEQ_LM;
        m->norm = GM_NORM_LAYER;
        m->gated_mlp = false;
        m->final_norm = false;
        m->qkv_bias = m->out_bias = m->mlp_bias = true;
        m->act = GM_ACT_GELU;
        m->tied_embeddings = true;
        m->emb_norm = true;
        break;
    default:
        break;
    }
}

/* Where the common dimensions are in this family's config. */
struct dim_keys {
    const char *hidden, *hidden2;
    const char *layers, *layers2;
    const char *heads, *heads2;
    const char *inter; /* NULL: the MLP is 4 x hidden unless 'inter_opt' says otherwise */
    const char *inter_opt;
};

/* Defaults of a config class that its saved JSON may leave out (transformers writes only
 * what differs from them).  Only Gemma3TextConfig needs them: the text_config of a
 * multimodal Gemma-3 checkpoint gives hidden_size, intermediate_size, num_hidden_layers
 * and sliding_window and nothing else. */
struct class_defaults {
    uint64_t hidden, layers, heads, inter, vocab, kv_heads, head_dim, positions, window;
};

static struct class_defaults defaults_of(enum gm_arch a, bool text_config)
{
    struct class_defaults d = {0};
    if (a == GM_ARCH_GEMMA3) /* transformers Gemma3TextConfig.__init__ */
        d = (struct class_defaults){2304, 26, 8, 9216, 262208, 4, 256, 131072, 4096};
    /* LlamaConfig.__init__, which the text_config of a LLaVA checkpoint leans on
     * (llava-hf/llava-1.5-7b-hf gives model_type, vocab_size and positions only) */
    if (a == GM_ARCH_LLAMA && text_config)
        d = (struct class_defaults){4096, 32, 32, 11008, 32000, 0, 0, 2048, 0};
    return d;
}

static struct dim_keys keys_of(enum gm_arch a)
{
    switch (a) {
    case GM_ARCH_GPT2:
    case GM_ARCH_GPT_BIGCODE:
        return (struct dim_keys){"n_embd", NULL, "n_layer", NULL, "n_head", NULL, NULL, "n_inner"};
    case GM_ARCH_FALCON:
        return (struct dim_keys){
            "hidden_size", "n_embed", "num_hidden_layers", "n_layer", "num_attention_heads",
            "n_head",      NULL,      "ffn_hidden_size"};
    case GM_ARCH_DISTILBERT:
        return (struct dim_keys){"dim",     NULL, "n_layers",   NULL,
                                 "n_heads", NULL, "hidden_dim", NULL};
    case GM_ARCH_T5:
        return (struct dim_keys){"d_model",   NULL, "num_layers", NULL,
                                 "num_heads", NULL, "d_ff",       NULL};
    case GM_ARCH_BART:
        return (struct dim_keys){
            "d_model",         NULL, "encoder_layers", NULL, "encoder_attention_heads", NULL,
            "encoder_ffn_dim", NULL};
    default:
        return (struct dim_keys){"hidden_size",         NULL, "num_hidden_layers", NULL,
                                 "num_attention_heads", NULL, "intermediate_size", NULL};
    }
}

/* Elements of a JSON array or object member (0 when absent). */
static size_t member_size(struct reader *r, const char *key)
{
    json_t *v = json_object_get(r->root, key);
    return json_is_array(v) ? json_array_size(v) : json_is_object(v) ? json_object_size(v) : 0;
}

/* Whether integer 'i' is in the array 'key'. */
static bool array_has(struct reader *r, const char *key, uint64_t i)
{
    json_t *v = json_object_get(r->root, key), *e;
    size_t k;
    if (!json_is_array(v))
        return false;
    json_array_foreach(v, k, e)
    {
        if (json_is_integer(e) && json_integer_value(e) >= 0 &&
            (uint64_t)json_integer_value(e) == i)
            return true;
    }
    return false;
}

/* Whether entry 'i' of the array 'key' is the integer 'value'. */
static bool array_has_value(struct reader *r, const char *key, uint64_t i, json_int_t value)
{
    json_t *e = json_array_get(json_object_get(r->root, key), (size_t)i);
    return json_is_integer(e) && json_integer_value(e) == value;
}

/* Entries of the string array 'key' equal to 'value'. */
static uint64_t array_count_str(struct reader *r, const char *key, const char *value)
{
    json_t *v = json_object_get(r->root, key), *e;
    size_t k;
    uint64_t n = 0;
    if (!json_is_array(v))
        return 0;
    json_array_foreach(v, k, e)
    {
        if (json_is_string(e) && !strcmp(json_string_value(e), value))
            n++;
    }
    return n;
}

/* rope_scaling: its type ("rope_type", or "type" in configs saved before transformers 4.45),
 * "factor" and "original_max_position_embeddings"; transformers v5 saves the same block as
 * "rope_parameters", flat or one block per layer type ({"full_attention": {...},
 * "sliding_attention": {...}}: "In Transformers v5 rope_parameters could be TypedDict or
 * dict[str, TypedDict]", vllm/config/model.py _get_and_verify_max_len @ 0052a5b).  The block
 * stays as the file gives it: what it means for the positions an engine serves is the engine's
 * rule (stage_engine.c). */
static const struct {
    const char *name;
    enum gm_rope_scaling kind;
} rope_kinds[] = {
    {"default", GM_ROPE_NONE}, {"linear", GM_ROPE_LINEAR}, {"dynamic", GM_ROPE_DYNAMIC},
    {"yarn", GM_ROPE_YARN},    {"llama3", GM_ROPE_LLAMA3}, {"longrope", GM_ROPE_LONGROPE},
    {"su", GM_ROPE_LONGROPE},
};

const char *gm_rope_scaling_name(enum gm_rope_scaling k)
{
    for (size_t i = 0; i < sizeof rope_kinds / sizeof rope_kinds[0]; i++)
        if (rope_kinds[i].kind == k)
            return rope_kinds[i].name;
    return "other";
}

struct rope_block {
    enum gm_rope_scaling kind;
    double factor;
    uint64_t original;
};

/* One rope block (its type, factor and original_max_position_embeddings); false after a bad
 * factor (r->st set). */
static bool read_rope_block(struct reader *r, json_t *rs, const char *key, struct rope_block *b)
{
    const char *type = json_string_value(json_object_get(rs, "rope_type"));
    json_t *f, *o;
    if (!type)
        type = json_string_value(json_object_get(rs, "type"));
    b->kind = GM_ROPE_OTHER;
    for (size_t i = 0; type && i < sizeof rope_kinds / sizeof rope_kinds[0]; i++)
        if (!strcmp(type, rope_kinds[i].name))
            b->kind = rope_kinds[i].kind;
    f = json_object_get(rs, "factor");
    if (f && !json_is_null(f)) {
        if (!json_is_number(f) || !(json_number_value(f) > 0) || json_number_value(f) > 1e6) {
            if (r->st == GM_OK)
                r->st = gm_fail(r->err, GM_ERR_FORMAT, GM_NO_OFFSET,
                                "'%s.factor' must be a positive number up to 1e6", key);
            return false;
        }
        b->factor = json_number_value(f);
    }
    o = json_object_get(rs, "original_max_position_embeddings");
    if (json_is_integer(o) && json_integer_value(o) > 0)
        b->original = (uint64_t)json_integer_value(o);
    return true;
}

/* Whether every member of a rope_parameters object is itself an object: one block per layer
 * type (a flat block holds numbers and strings). */
static bool rope_nested(json_t *rs)
{
    const char *k;
    json_t *v;
    if (!json_object_size(rs))
        return false;
    json_object_foreach(rs, k, v)
    {
        if (!json_is_object(v))
            return false;
    }
    return true;
}

static void read_rope_scaling(struct reader *r, struct gm_model *m)
{
    const char *key = "rope_scaling", *k;
    json_t *rs = json_object_get(r->root, key), *v;
    struct rope_block got = {GM_ROPE_NONE, 0, 0};
    if (!json_is_object(rs)) {
        key = "rope_parameters";
        rs = json_object_get(r->root, key);
    }
    if (!json_is_object(rs))
        return; /* null or absent: no scaling */
    if (!rope_nested(rs)) {
        if (!read_rope_block(r, rs, key, &got))
            return;
    } else {
        /* one block per layer type: the block that scales the positions (vLLM takes each
         * block's factor but those of llama3 / longrope / su, and assumes them equal), else
         * the first */
        bool first = true;
        json_object_foreach(rs, k, v)
        {
            struct rope_block b = {GM_ROPE_NONE, 0, 0};
            if (!read_rope_block(r, v, key, &b))
                return;
            if (first || (b.kind != GM_ROPE_NONE && b.kind != GM_ROPE_LLAMA3 &&
                          b.kind != GM_ROPE_LONGROPE && b.factor > 0))
                got = b;
            first = false;
        }
    }
    m->rope_scaling = got.kind;
    m->rope_factor = got.factor;
    m->rope_original_positions = got.original;
}

/* Which layers slide a window, by family. */
static void sliding_layers(struct reader *r, struct gm_model *m)
{
    uint64_t v = defaults_of(m->arch, r->top != r->root).window;
    get_u64(r, "sliding_window", &v);
    if (v == 0)
        return;
    switch (m->arch) {
    case GM_ARCH_QWEN2:
    case GM_ARCH_QWEN3:
    case GM_ARCH_QWEN2_MOE:
    case GM_ARCH_QWEN3_MOE:
        if (get_bool(r, "use_sliding_window", false)) {
            uint64_t full = m->n_layers;
            get_u64(r, "max_window_layers", &full);
            m->sliding_window = v;
            m->n_sliding_layers = full < m->n_layers ? m->n_layers - full : 0;
        }
        break;
    case GM_ARCH_GEMMA2:
        m->sliding_window = v;
        m->n_sliding_layers = (m->n_layers + 1) / 2; /* even-numbered layers */
        break;
    case GM_ARCH_GPT_OSS:
        /* layer_types when present; else GptOssConfig's default: even-numbered layers slide */
        m->sliding_window = v;
        m->n_sliding_layers = member_size(r, "layer_types")
                                  ? array_count_str(r, "layer_types", "sliding_attention")
                                  : (m->n_layers + 1) / 2;
        break;
    case GM_ARCH_GEMMA3: {
        /* layer_types when present; else every sliding_window_pattern-th layer is global */
        uint64_t pattern = 6, n = array_count_str(r, "layer_types", "sliding_attention");
        get_u64(r, "sliding_window_pattern", &pattern);
        m->sliding_window = v;
        m->n_sliding_layers =
            member_size(r, "layer_types") ? n : m->n_layers - (pattern ? m->n_layers / pattern : 0);
        break;
    }
    case GM_ARCH_COHERE:
    case GM_ARCH_DEEPSEEK_V2:
    case GM_ARCH_DEEPSEEK_V3:
    case GM_ARCH_LLAMA4: /* chunked attention instead: read_family() */
    case GM_ARCH_QWEN3_NEXT:
    case GM_ARCH_JAMBA:
    case GM_ARCH_NEMOTRON_H:
    case GM_ARCH_FALCON_H1:
        break; /* no sliding window */
    default:
        m->sliding_window = v;
        m->n_sliding_layers = m->n_layers;
        break;
    }
    if (m->n_sliding_layers == 0)
        m->sliding_window = 0;
}

/* Encoders: which head sits on top (a classifier when architectures names one). */
static void encoder_head(struct reader *r, struct gm_model *m)
{
    json_t *archs = json_object_get(r->root, "architectures");
    const char *a =
        json_is_string(json_array_get(archs, 0)) ? json_string_value(json_array_get(archs, 0)) : "";
    if (!strstr(a, "ForSequenceClassification"))
        return;
    m->n_labels = member_size(r, "id2label") ? member_size(r, "id2label") : 2;
    get_u64(r, "num_labels", &m->n_labels);
    switch (m->arch) {
    case GM_ARCH_BERT:
    case GM_ARCH_DEBERTA_V2:
        m->pooler = true; /* pooler (ContextPooler), then the classifier */
        break;
    default:
        /* RoBERTa / XLM-R classification head, DistilBERT pre_classifier, ModernBERT head:
         * a dense h x h (with its bias, or a bias-free dense and a norm) before the output */
        m->pooler = false;
        m->cls_dense = true;
        break;
    }
}

/* Llama-4 (Llama4TextConfig, modeling_llama4.py): the layers in moe_layers (default every
 * interleave_moe_layer_step-th) hold num_local_experts routed experts of intermediate_size
 * plus one shared expert of the same width and a bias-free router; the others a dense MLP
 * of intermediate_size_mlp.  The RoPE layers (no_rope_layers[i] == 1; default all but every
 * no_rope_layer_interval-th) attend within chunks of attention_chunk_size tokens; the NoPE
 * layers attend globally.  The q/k norm is an L2 norm without weights. */
static void read_llama4(struct reader *r, struct gm_model *m)
{
    uint64_t step = 1, interval = 4, chunk = 8192, dense = 16384, rope = 0;
    size_t n_moe = member_size(r, "moe_layers");
    m->n_experts = 16;
    m->n_experts_active = 1;
    get_count(r, "num_local_experts", &m->n_experts);
    get_count(r, "num_experts_per_tok", &m->n_experts_active);
    get_count(r, "intermediate_size_mlp", &dense);
    get_u64(r, "interleave_moe_layer_step", &step);
    m->moe_intermediate = m->intermediate; /* intermediate_size: the experts' width */
    m->intermediate = dense;
    m->n_shared_experts = 1;
    if (json_is_array(json_object_get(r->root, "moe_layers")))
        m->n_dense_layers = n_moe < m->n_layers ? m->n_layers - n_moe : 0;
    else
        m->n_dense_layers = step ? m->n_layers - m->n_layers / step : m->n_layers;
    get_u64(r, "attention_chunk_size", &chunk);
    get_u64(r, "no_rope_layer_interval", &interval);
    if (member_size(r, "no_rope_layers")) {
        for (uint64_t i = 0; i < m->n_layers && i < ((uint64_t)1 << 20); i++)
            if (array_has_value(r, "no_rope_layers", i, 1))
                rope++;
    } else {
        rope = m->n_layers - (interval ? m->n_layers / interval : 0);
    }
    if (chunk && rope) {
        m->sliding_window = chunk;
        m->n_sliding_layers = rope < m->n_layers ? rope : m->n_layers;
        m->chunked_attention = true;
    }
}

/* Qwen3-Next (Qwen3NextConfig): layer_types names the "linear_attention" layers (default:
 * all but every full_attention_interval-th), each a Gated DeltaNet of linear_num_key_heads x
 * linear_key_head_dim keys, linear_num_value_heads x linear_value_head_dim values and a
 * depthwise convolution of linear_conv_kernel_dim. */
static void read_linear_attention(struct reader *r, struct gm_model *m)
{
    uint64_t interval = 4;
    m->lin_k_heads = 16;
    m->lin_v_heads = 32;
    m->lin_k_dim = m->lin_v_dim = 128;
    m->lin_conv_kernel = 4;
    get_count(r, "linear_num_key_heads", &m->lin_k_heads);
    get_count(r, "linear_num_value_heads", &m->lin_v_heads);
    get_count(r, "linear_key_head_dim", &m->lin_k_dim);
    get_count(r, "linear_value_head_dim", &m->lin_v_dim);
    get_count(r, "linear_conv_kernel_dim", &m->lin_conv_kernel);
    get_count(r, "full_attention_interval", &interval);
    m->n_linear_layers = member_size(r, "layer_types")
                             ? array_count_str(r, "layer_types", "linear_attention")
                             : m->n_layers - m->n_layers / interval;
}

/* Jamba (JambaConfig, modeling_jamba.py): layer i attends when i % attn_layer_period ==
 * attn_layer_offset, else it is a Mamba mixer of mamba_expand x hidden channels, d_state
 * mamba_d_state, a convolution of mamba_d_conv and a time-step rank mamba_dt_rank ("auto":
 * ceil(hidden / 16)); its MLP is num_experts experts (top num_experts_per_tok, bias-free
 * router) when i % expert_layer_period == expert_layer_offset, else dense. */
static void read_jamba(struct reader *r, struct gm_model *m)
{
    uint64_t ap = 8, ao = 4, ep = 2, eo = 1, expand = 2;
    json_t *rank = json_object_get(r->root, "mamba_dt_rank");
    m->n_experts = 16;
    m->n_experts_active = 2;
    m->mamba_d_state = 16;
    m->lin_conv_kernel = 4;
    get_count(r, "num_experts", &m->n_experts);
    get_count(r, "num_experts_per_tok", &m->n_experts_active);
    get_count(r, "attn_layer_period", &ap);
    get_u64(r, "attn_layer_offset", &ao);
    get_count(r, "expert_layer_period", &ep);
    get_u64(r, "expert_layer_offset", &eo);
    get_count(r, "mamba_expand", &expand);
    get_count(r, "mamba_d_state", &m->mamba_d_state);
    get_count(r, "mamba_d_conv", &m->lin_conv_kernel);
    m->mamba_d_inner = gm_mul_sat(expand, m->hidden);
    m->mamba_dt_rank = json_is_integer(rank) && json_integer_value(rank) > 0
                           ? (uint64_t)json_integer_value(rank)
                           : (m->hidden + 15) / 16;
    for (uint64_t i = 0; i < m->n_layers && i < ((uint64_t)1 << 20); i++) {
        if (i % ap != ao)
            m->n_linear_layers++;
        if (m->n_experts <= 1 || i % ep != eo)
            m->n_dense_layers++;
    }
    if (m->n_experts <= 1)
        m->n_experts = m->n_experts_active = 0;
}

/* Nemotron-H (modeling_nemotron_h.py, NemotronHBlock): hybrid_override_pattern has one
 * character per block, 'M' a Mamba-2 mixer, '*' attention, '-' an MLP, 'E' a mixture of
 * experts (not modelled: refused); newer configs spell it layers_block_type ("mamba",
 * "attention", "mlp", "moe").  The mixer: mamba_num_heads x mamba_head_dim channels,
 * ssm_state_size, n_groups (mamba_n_groups), conv_kernel (mamba_d_conv); attention of
 * attention_head_dim (head_dim). */
static void read_nemotron_h(struct reader *r, struct gm_model *m)
{
    static const char *const kinds[] = {"mamba", "attention", "mlp", "moe"};
    const char *pat = get_str(r, "hybrid_override_pattern");
    uint64_t n[4] = {0, 0, 0, 0}, hd = 64;
    json_t *types = json_object_get(r->root, "layers_block_type"), *e;
    size_t k;
    m->mamba_groups = 8;
    m->mamba_d_state = 128;
    m->lin_conv_kernel = 4;
    get_count(r, "mamba_head_dim", &hd);
    m->mamba_heads = need_u64(r, "mamba_num_heads");
    if (!get_count(r, "n_groups", &m->mamba_groups))
        get_count(r, "mamba_n_groups", &m->mamba_groups);
    get_count(r, "ssm_state_size", &m->mamba_d_state);
    if (!get_count(r, "conv_kernel", &m->lin_conv_kernel))
        get_count(r, "mamba_d_conv", &m->lin_conv_kernel);
    get_count(r, "attention_head_dim", &m->head_dim);
    m->mamba_d_inner = gm_mul_sat(m->mamba_heads, hd);
    if (pat) {
        static const char marks[] = "M*-E";
        for (const char *c = pat; *c; c++) {
            const char *at = strchr(marks, *c);
            if (!at) {
                if (r->st == GM_OK)
                    r->st = gm_fail(r->err, GM_ERR_FORMAT, GM_NO_OFFSET,
                                    "nemotron_h: hybrid_override_pattern has an unknown block "
                                    "type at position %zu (known: M, *, -, E)",
                                    (size_t)(c - pat));
                return;
            }
            n[at - marks]++;
        }
    } else if (json_is_array(types)) {
        json_array_foreach(types, k, e)
        {
            size_t i = 0;
            while (i < 4 && !(json_is_string(e) && !strcmp(json_string_value(e), kinds[i])))
                i++;
            if (i == 4) {
                if (r->st == GM_OK)
                    r->st = gm_fail(r->err, GM_ERR_FORMAT, GM_NO_OFFSET,
                                    "nemotron_h: layers_block_type[%zu] is not one of \"mamba\", "
                                    "\"attention\", \"mlp\", \"moe\"",
                                    k);
                return;
            }
            n[i]++;
        }
    } else if (r->st == GM_OK) {
        add_missing(r, "hybrid_override_pattern");
        return;
    }
    if (n[3] && r->st == GM_OK)
        r->st = gm_fail(r->err, GM_ERR_UNSUPPORTED, GM_NO_OFFSET,
                        "nemotron_h: %llu mixture-of-experts blocks ('E' / \"moe\") are not "
                        "modelled, only Mamba-2, attention and MLP blocks",
                        (unsigned long long)n[3]);
    m->n_linear_layers = n[0];
    m->n_attn_layers = n[1];
    m->n_mlp_layers = n[2];
}

/* Falcon-H1 (configuration_falcon_h1.py, FalconH1Mixer): every layer's Mamba-2 mixer has
 * mamba_d_ssm channels (null: mamba_expand x hidden) in mamba_n_heads heads, mamba_n_groups
 * groups of mamba_d_state, a convolution of mamba_d_conv, and a gated RMSNorm only when
 * mamba_rms_norm. */
static void read_falcon_h1(struct reader *r, struct gm_model *m)
{
    uint64_t expand = 2;
    m->mamba_heads = 128;
    m->mamba_groups = 1;
    m->mamba_d_state = 256;
    m->lin_conv_kernel = 4;
    get_count(r, "mamba_expand", &expand);
    m->mamba_d_inner = gm_mul_sat(expand, m->hidden);
    get_count(r, "mamba_d_ssm", &m->mamba_d_inner);
    get_count(r, "mamba_n_heads", &m->mamba_heads);
    get_count(r, "mamba_n_groups", &m->mamba_groups);
    get_count(r, "mamba_d_state", &m->mamba_d_state);
    get_count(r, "mamba_d_conv", &m->lin_conv_kernel);
    m->mamba_gated_norm = get_bool(r, "mamba_rms_norm", false);
    m->n_linear_layers = m->n_layers;
}

/* Family-specific keys after the common ones. */
static void read_family(struct reader *r, struct gm_model *m)
{
    uint64_t v = 0;
    switch (m->arch) {
    case GM_ARCH_MIXTRAL:
        m->n_experts = need_u64(r, "num_local_experts");
        m->n_experts_active = need_u64(r, "num_experts_per_tok");
        break;
    case GM_ARCH_PHI:
        m->attn_dropout = get_double(r, "attention_dropout", 0);
        m->hidden_dropout = get_double(r, "resid_pdrop", 0);
        break;
    case GM_ARCH_BERT:
    case GM_ARCH_ROBERTA:
    case GM_ARCH_XLM_ROBERTA:
    case GM_ARCH_DEBERTA_V2:
        m->n_positions_learned = m->max_positions;
        m->n_token_types = m->arch == GM_ARCH_DEBERTA_V2 ? 0 : 2;
        get_u64(r, "type_vocab_size", &m->n_token_types);
        m->attn_dropout = get_double(r, "attention_probs_dropout_prob", 0);
        m->hidden_dropout = get_double(r, "hidden_dropout_prob", 0);
        if (m->arch == GM_ARCH_DEBERTA_V2) {
            /* v3: no absolute positions; one relative table of 2 x position_buckets rows
             * (or 2 x max_relative_positions, -1 meaning max_position_embeddings) */
            uint64_t buckets = 0, maxrel = 0;
            if (!get_bool(r, "position_biased_input", true))
                m->n_positions_learned = 0;
            json_t *mr = json_object_get(r->root, "max_relative_positions");
            if (json_is_integer(mr) && json_integer_value(mr) > 0)
                maxrel = (uint64_t)json_integer_value(mr);
            get_u64(r, "position_buckets", &buckets);
            if (get_bool(r, "relative_attention", false))
                m->rel_pos_rows = 2 * (buckets ? buckets : maxrel ? maxrel : m->max_positions);
        }
        encoder_head(r, m);
        break;
    case GM_ARCH_DISTILBERT:
        if (!get_bool(r, "sinusoidal_pos_embds", false))
            m->n_positions_learned = m->max_positions;
        m->attn_dropout = get_double(r, "attention_dropout", 0);
        m->hidden_dropout = get_double(r, "dropout", 0);
        encoder_head(r, m);
        break;
    case GM_ARCH_MODERNBERT:
        if (get_bool(r, "norm_bias", false))
            m->norm = GM_NORM_LAYER;
        if (get_bool(r, "attention_bias", false))
            m->qkv_bias = m->out_bias = true;
        m->mlp_bias = get_bool(r, "mlp_bias", false);
        encoder_head(r, m);
        break;
    case GM_ARCH_GPT_BIGCODE:
        if (get_bool(r, "multi_query", true))
            m->n_kv_heads = 1;
        break;
    case GM_ARCH_FALCON: {
        bool newarch = get_bool(r, "new_decoder_architecture", false);
        bool bias = get_bool(r, "bias", false);
        uint64_t lns = 2;
        m->qkv_bias = m->out_bias = m->mlp_bias = bias;
        if (newarch) {
            if (!get_count_either(r, "num_kv_heads", "n_head_kv", &m->n_kv_heads))
                m->n_kv_heads = m->n_heads;
            get_u64(r, "num_ln_in_parallel_attn", &lns);
            m->norms_per_layer = (unsigned)(lns == 1 ? 1 : 2);
        } else {
            m->n_kv_heads = get_bool(r, "multi_query", true) ? 1 : m->n_heads;
            m->norms_per_layer = get_bool(r, "parallel_attn", true) ? 1 : 2;
        }
        if (!m->max_positions)
            m->max_positions = 2048;
        break;
    }
    case GM_ARCH_COHERE:
        m->qk_norm_full = get_bool(r, "use_qk_norm", false);
        break;
    case GM_ARCH_GEMMA2:
    case GM_ARCH_GEMMA3:
        m->attn_softcap = get_real(r, "attn_logit_softcapping", 0);
        m->final_softcap = get_real(r, "final_logit_softcapping", 0);
        break;
    case GM_ARCH_STARCODER2:
        if (!get_bool(r, "use_bias", true))
            m->qkv_bias = m->out_bias = m->mlp_bias = false;
        break;
    case GM_ARCH_QWEN2_MOE:
    case GM_ARCH_QWEN3_MOE:
    case GM_ARCH_QWEN3_NEXT: {
        uint64_t step = 1;
        m->n_experts = need_u64(r, "num_experts");
        m->n_experts_active = need_u64(r, "num_experts_per_tok");
        m->moe_intermediate = need_u64(r, "moe_intermediate_size");
        get_u64(r, "decoder_sparse_step", &step);
        /* a layer is dense when mlp_only_layers names it or the sparse step skips it */
        for (uint64_t i = 0; i < m->n_layers && i < ((uint64_t)1 << 20); i++)
            if (array_has(r, "mlp_only_layers", i) || !step || (i + 1) % step != 0)
                m->n_dense_layers++;
        if (m->arch != GM_ARCH_QWEN3_MOE && get_u64(r, "shared_expert_intermediate_size", &v) &&
            v) {
            m->shared_intermediate = v;
            m->shared_expert_gate = true;
        }
        if (m->arch == GM_ARCH_QWEN3_NEXT)
            read_linear_attention(r, m);
        break;
    }
    case GM_ARCH_GPT_OSS:
        m->n_experts = need_either(r, "num_local_experts", "num_experts", 0);
        m->n_experts_active = need_either(r, "num_experts_per_tok", "experts_per_token", 0);
        break;
    case GM_ARCH_LLAMA4:
        read_llama4(r, m);
        break;
    case GM_ARCH_JAMBA:
        read_jamba(r, m);
        break;
    case GM_ARCH_NEMOTRON_H:
        read_nemotron_h(r, m);
        break;
    case GM_ARCH_FALCON_H1:
        read_falcon_h1(r, m);
        break;
    case GM_ARCH_DEEPSEEK_V2:
    case GM_ARCH_DEEPSEEK_V3: {
        uint64_t nope = need_u64(r, "qk_nope_head_dim"), freq = 1, first = 0;
        const char *topk = get_str(r, "topk_method");
        m->kv_lora_rank = need_u64(r, "kv_lora_rank");
        m->qk_rope_head_dim = need_u64(r, "qk_rope_head_dim");
        m->head_dim_v = need_u64(r, "v_head_dim");
        get_u64(r, "q_lora_rank", &m->q_lora_rank);
        m->head_dim = nope + m->qk_rope_head_dim;
        m->n_kv_heads = m->n_heads; /* keys and values per head, from the latent */
        get_u64(r, "n_routed_experts", &m->n_experts);
        if (m->n_experts) {
            m->n_experts_active = need_u64(r, "num_experts_per_tok");
            m->moe_intermediate = need_u64(r, "moe_intermediate_size");
            get_u64(r, "n_shared_experts", &m->n_shared_experts);
            get_u64(r, "first_k_dense_replace", &first);
            get_u64(r, "moe_layer_freq", &freq);
            for (uint64_t i = 0; i < m->n_layers && i < ((uint64_t)1 << 20); i++)
                if (i < first || !freq || i % freq != 0)
                    m->n_dense_layers++;
        }
        m->router_bias = topk && !strcmp(topk, "noaux_tc");
        /* DeepSeek-V3.2's lightning indexer (deepseek_v32) */
        get_u64(r, "index_n_heads", &m->index_n_heads);
        get_u64(r, "index_head_dim", &m->index_head_dim);
        get_u64(r, "index_topk", &m->index_topk);
        break;
    }
    case GM_ARCH_T5: {
        const char *ff = get_str(r, "feed_forward_proj");
        m->n_decoder_layers = m->n_layers;
        get_count(r, "num_decoder_layers", &m->n_decoder_layers);
        get_count(r, "d_kv", &m->head_dim);
        m->n_kv_heads = m->n_heads;
        m->rel_attn_buckets = 32;
        get_u64(r, "relative_attention_num_buckets", &m->rel_attn_buckets);
        if (ff && !strncmp(ff, "gated-", 6)) {
            m->gated_mlp = true;
            m->act = parse_act(ff + 6, GM_ACT_GELU);
        } else if (ff) {
            m->act = parse_act(ff, GM_ACT_RELU);
        }
        m->hidden_dropout = get_double(r, "dropout_rate", 0);
        break;
    }
    case GM_ARCH_BART: {
        uint64_t dh = m->n_heads, df = m->intermediate;
        m->n_decoder_layers = need_u64(r, "decoder_layers");
        get_count(r, "decoder_attention_heads", &dh);
        get_count(r, "decoder_ffn_dim", &df);
        if ((dh != m->n_heads || df != m->intermediate) && r->st == GM_OK)
            r->st = gm_fail(r->err, GM_ERR_UNSUPPORTED, GM_NO_OFFSET,
                            "model type 'bart': a decoder with other heads or FFN width than "
                            "the encoder is not modelled");
        m->n_positions_learned = m->max_positions ? m->max_positions + 2 : 0;
        if (get_bool(r, "add_final_layer_norm", false))
            m->final_norm = true;
        m->hidden_dropout = get_double(r, "dropout", 0);
        m->attn_dropout = get_double(r, "attention_dropout", 0);
        break;
    }
    default:
        break;
    }
}

/* ---- the vision tower of a vision-language model ---- */

static uint64_t vc_u64(json_t *o, const char *key, uint64_t dflt)
{
    json_t *v = json_object_get(o, key);
    return json_is_integer(v) && json_integer_value(v) > 0 &&
                   json_integer_value(v) < ((json_int_t)1 << 24)
               ? (uint64_t)json_integer_value(v)
               : dflt;
}

/* vision_config of the top level: LLaVA's CLIP / SigLIP tower (CLIPVisionConfig defaults),
 * Qwen2-VL's (embed_dim, mlp_ratio) and Qwen2.5-VL's (hidden_size, intermediate_size, SwiGLU,
 * RMSNorm).  Other wrappers keep text_only: their towers are not counted. */
static void read_vision(json_t *top, struct gm_model *m)
{
    json_t *vc = json_object_get(top, "vision_config");
    const char *mt = json_string_value(json_object_get(top, "model_type"));
    struct gm_vision *v = &m->vision;
    if (!mt || !json_is_object(vc))
        return;
    if (!strcmp(mt, "llava")) {
        v->kind = GM_VISION_CLIP;
        v->hidden = vc_u64(vc, "hidden_size", 768);
        v->layers = vc_u64(vc, "num_hidden_layers", 12);
        v->heads = vc_u64(vc, "num_attention_heads", 12);
        v->intermediate = vc_u64(vc, "intermediate_size", 3072);
        v->patch = vc_u64(vc, "patch_size", 32);
        v->image_size = vc_u64(vc, "image_size", 224);
    } else if (!strcmp(mt, "qwen2_5_vl") || !strcmp(mt, "qwen2_vl")) {
        bool v25 = !strcmp(mt, "qwen2_5_vl");
        v->kind = GM_VISION_QWEN_VL;
        v->hidden = v25 ? vc_u64(vc, "hidden_size", 1280) : vc_u64(vc, "embed_dim", 1280);
        v->layers = vc_u64(vc, "depth", 32);
        v->heads = vc_u64(vc, "num_heads", 16);
        v->intermediate =
            v25 ? vc_u64(vc, "intermediate_size", 3420) : v->hidden * vc_u64(vc, "mlp_ratio", 4);
        v->patch = vc_u64(vc, "patch_size", 14);
        v->merge = vc_u64(vc, "spatial_merge_size", 2);
        v->temporal = vc_u64(vc, "temporal_patch_size", 2);
        v->gated_mlp = v->rms_norm = v25;
    } else {
        return;
    }
    m->text_only = false;
}

/* ---- quantization_config ---- */

static unsigned module_list_roles(json_t *list)
{
    json_t *e;
    size_t k;
    unsigned roles = 0;
    if (!json_is_array(list))
        return 0;
    json_array_foreach(list, k, e)
    {
        if (json_is_string(e))
            roles |= gm_quant_module_roles(json_string_value(e));
    }
    return roles;
}

static uint64_t obj_u64(json_t *o, const char *key, uint64_t dflt)
{
    json_t *v = json_object_get(o, key);
    return json_is_integer(v) && json_integer_value(v) >= 0 ? (uint64_t)json_integer_value(v)
                                                            : dflt;
}

static bool obj_bool(json_t *o, const char *key, bool dflt)
{
    json_t *v = json_object_get(o, key);
    return json_is_boolean(v) ? json_is_true(v) : dflt;
}

static const char *obj_str(json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    return json_is_string(v) ? json_string_value(v) : "";
}

/* compressed-tensors: the first config group's weights and input activations. */
static void compressed_tensors(json_t *qc, struct gm_quant *q)
{
    json_t *groups = json_object_get(qc, "config_groups"), *g, *w, *in;
    const char *key, *strategy, *type;
    json_object_foreach(groups, key, g)
    {
        w = json_object_get(g, "weights");
        in = json_object_get(g, "input_activations");
        type = obj_str(w, "type");
        strategy = obj_str(w, "strategy");
        if (!strcmp(type, "float") && obj_u64(w, "num_bits", 8) == 4) {
            gm_quant_init(q, GM_QUANT_NVFP4); /* nvfp4-pack-quantized: strategy tensor_group */
        } else if (!strcmp(type, "float")) {
            gm_quant_init(q, GM_QUANT_FP8);
            q->scale = !strcmp(strategy, "channel") ? GM_SCALE_CHANNEL
                       : !strcmp(strategy, "block") ? GM_SCALE_BLOCK
                                                    : GM_SCALE_TENSOR;
            q->input_scale = json_is_object(in) && !obj_bool(in, "dynamic", false);
        } else {
            gm_quant_init(q, GM_QUANT_INT);
            q->bits = (unsigned)obj_u64(w, "num_bits", 4);
            q->group_size = !strcmp(strategy, "group") ? obj_u64(w, "group_size", 128) : 0;
            q->zeros = !obj_bool(w, "symmetric", true);
        }
        break;
    }
    q->keep |= module_list_roles(json_object_get(qc, "ignore"));
}

static void read_quant(json_t *qc, struct gm_quant *q)
{
    const char *method = obj_str(qc, "quant_method");
    json_t *v;
    gm_quant_init(q, GM_QUANT_NONE);
    if (!json_is_object(qc) || !*method)
        return;
    if (!strcmp(method, "gptq")) {
        gm_quant_init(q, GM_QUANT_GPTQ);
        q->bits = (unsigned)obj_u64(qc, "bits", 4);
        v = json_object_get(qc, "group_size");
        q->group_size =
            json_is_integer(v) && json_integer_value(v) > 0 ? (uint64_t)json_integer_value(v) : 0;
        q->desc_act = obj_bool(qc, "desc_act", false);
        q->lm_head = obj_bool(qc, "lm_head", false);
    } else if (!strcmp(method, "awq")) {
        gm_quant_init(q, GM_QUANT_AWQ);
        q->bits = (unsigned)obj_u64(qc, "bits", obj_u64(qc, "w_bit", 4));
        q->group_size = obj_u64(qc, "group_size", obj_u64(qc, "q_group_size", 128));
        q->zeros = obj_bool(qc, "zero_point", true);
        q->keep |= module_list_roles(json_object_get(qc, "modules_to_not_convert"));
    } else if (!strcmp(method, "bitsandbytes")) {
        bool four = obj_bool(qc, "load_in_4bit", false);
        gm_quant_init(q, !four                                                ? GM_QUANT_BNB_INT8
                         : !strcmp(obj_str(qc, "bnb_4bit_quant_type"), "fp4") ? GM_QUANT_BNB_FP4
                                                                              : GM_QUANT_BNB_NF4);
        q->double_quant = obj_bool(qc, "bnb_4bit_use_double_quant", false);
        q->keep |= module_list_roles(json_object_get(qc, "llm_int8_skip_modules"));
    } else if (!strcmp(method, "fp8") || !strcmp(method, "fbgemm_fp8")) {
        json_t *bs = json_object_get(qc, "weight_block_size");
        gm_quant_init(q, GM_QUANT_FP8);
        q->scale = !strcmp(method, "fbgemm_fp8") ? GM_SCALE_CHANNEL : GM_SCALE_TENSOR;
        if (json_is_array(bs) && json_array_size(bs) == 2 &&
            json_integer_value(json_array_get(bs, 0)) > 0 &&
            json_integer_value(json_array_get(bs, 1)) > 0) {
            q->scale = GM_SCALE_BLOCK;
            q->block_rows = (uint64_t)json_integer_value(json_array_get(bs, 0));
            q->block_cols = (uint64_t)json_integer_value(json_array_get(bs, 1));
        }
        q->input_scale = !strcmp(obj_str(qc, "activation_scheme"), "static");
        q->keep |= module_list_roles(json_object_get(qc, "modules_to_not_convert"));
    } else if (!strcmp(method, "mxfp4")) {
        gm_quant_init(q, GM_QUANT_MXFP4);
        q->keep |= module_list_roles(json_object_get(qc, "modules_to_not_convert"));
    } else if (!strcmp(method, "modelopt")) {
        /* NVIDIA ModelOpt checkpoints: quant_algo names the scheme (vLLM modelopt.py) */
        const char *algo = obj_str(qc, "quant_algo");
        if (!strcmp(algo, "NVFP4"))
            gm_quant_init(q, GM_QUANT_NVFP4);
        else if (!strcmp(algo, "FP8"))
            gm_quant_init(q, GM_QUANT_FP8);
        else
            copy_str(q->unknown, sizeof q->unknown, *algo ? algo : method);
        q->input_scale = q->method == GM_QUANT_FP8;
        q->keep |= module_list_roles(json_object_get(qc, "exclude_modules"));
        q->keep |= module_list_roles(json_object_get(qc, "ignore"));
    } else if (!strcmp(method, "compressed-tensors")) {
        compressed_tensors(qc, q);
    } else {
        copy_str(q->unknown, sizeof q->unknown, method);
    }
}

static enum gm_status parse_root(struct reader *r, struct gm_model *m)
{
    const char *mt = get_str(r, "model_type");
    const char *s;
    struct dim_keys k;
    struct class_defaults d;
    bool gpt2;

    m->arch = find_arch(mt, json_object_get(r->root, "architectures"));
    if (m->arch == GM_ARCH_UNKNOWN && r->top != r->root &&
        !json_object_get(r->root, "architectures")) {
        /* a text_config without a model_type of its own: the wrapper's names it */
        const char *top = json_string_value(json_object_get(r->top, "model_type"));
        if (!mt && top && arch_of_type(top) != GM_ARCH_UNKNOWN) {
            mt = top;
            m->arch = arch_of_type(top);
        }
    }
    if (mt)
        copy_str(m->model_type, sizeof(m->model_type), mt);
    else if (m->arch != GM_ARCH_UNKNOWN)
        copy_str(m->model_type, sizeof(m->model_type), gm_arch_name(m->arch));
    if ((s = get_str(r, "_name_or_path")) && *s)
        copy_str(m->name, sizeof(m->name), s);
    set_layout(m);
    gpt2 = m->arch == GM_ARCH_GPT2 || m->arch == GM_ARCH_GPT_BIGCODE;
    k = keys_of(m->arch);
    d = defaults_of(m->arch, r->top != r->root);

    m->hidden = need_either(r, k.hidden, k.hidden2, d.hidden);
    m->n_layers = need_either(r, k.layers, k.layers2, d.layers);
    m->n_heads = need_either(r, k.heads, k.heads2, d.heads);
    m->vocab = need_either(r, "vocab_size", NULL, d.vocab);
    if (k.inter)
        m->intermediate = need_either(r, k.inter, NULL, d.inter);
    else if (!get_count(r, k.inter_opt, &m->intermediate))
        m->intermediate = 4 * m->hidden;
    if (gpt2) {
        get_u64(r, "n_positions", &m->max_positions);
        m->n_positions_learned = m->max_positions;
        m->attn_dropout = get_double(r, "attn_pdrop", 0);
        m->hidden_dropout = get_double(r, "resid_pdrop", 0);
    } else {
        m->max_positions = d.positions;
        get_u64(r, "max_position_embeddings", &m->max_positions);
        m->attn_dropout = get_double(r, "attention_dropout", 0);
        m->hidden_dropout = get_double(r, "hidden_dropout", 0);
    }
    if (r->st != GM_OK)
        return r->st;
    if (r->missing[0] && m->arch == GM_ARCH_UNKNOWN) {
        /* not a layout gpumem reads (rwkv, mamba, ...): say so, not which keys lack */
        return gm_fail(r->err, GM_ERR_UNSUPPORTED, GM_NO_OFFSET,
                       "model type '%s' is not an architecture gpumem knows (the %d it knows: "
                       "gpumem estimate --list-archs; weight files beside the config still "
                       "give its exact size)",
                       m->model_type[0] ? m->model_type : "?", GM_ARCH__COUNT - 1);
    }
    /* fields still missing are said at the end, after everything else is read: weight files
     * beside the config may give them (their shapes, modelfile_model.c) */
    m->incomplete = r->missing[0] != '\0';

    m->n_kv_heads = d.kv_heads ? d.kv_heads : m->n_heads;
    get_count(r, "num_key_value_heads", &m->n_kv_heads);
    if (!get_count(r, "head_dim", &m->head_dim) && m->n_heads)
        m->head_dim = d.head_dim ? d.head_dim : m->hidden / m->n_heads;
    m->tied_embeddings = get_bool(r, "tie_word_embeddings", m->tied_embeddings);
    m->use_cache_off = !get_bool(r, "use_cache", true);
    if (get_bool(r, "attention_bias", false))
        m->qkv_bias = m->out_bias = true;
    if (get_bool(r, "mlp_bias", false))
        m->mlp_bias = true;
    m->act = parse_act(get_str(r, "hidden_activation"), m->act);
    if (m->arch != GM_ARCH_GEMMA && m->arch != GM_ARCH_GEMMA2 && m->arch != GM_ARCH_GEMMA3)
        m->act = parse_act(get_str(r, gpt2 ? "activation_function" : "hidden_act"), m->act);
    s = get_str(r, "torch_dtype");
    if (!s)
        s = get_str(r, "dtype");
    m->dtype = gm_dtype_parse(s);

    sliding_layers(r, m);
    read_rope_scaling(r, m);
    read_family(r, m);
    read_quant(json_object_get(r->top, "quantization_config"), &m->quant);
    m->text_only = r->top != r->root;
    read_vision(r->top, m);
    if (r->st != GM_OK)
        return r->st;
    if (r->missing[0]) {
        m->incomplete = true;
        return gm_fail(r->err, GM_ERR_FORMAT, GM_NO_OFFSET, "model type '%s': missing fields: %s",
                       m->model_type[0] ? m->model_type : "?", r->missing);
    }
    if (m->arch == GM_ARCH_UNKNOWN)
        return GM_OK; /* generic fields only; gm_model_validate() says what is missing */
    return gm_model_validate(m, r->err);
}

enum gm_status gm_model_parse_hf_config(const char *json, size_t len, struct gm_model *out,
                                        struct gm_error *err)
{
    struct reader r;
    struct gm_model m;
    enum gm_status st;

    if (len > CONFIG_MAX_BYTES)
        return gm_fail(err, GM_ERR_LIMIT, GM_NO_OFFSET, "larger than %zu bytes", CONFIG_MAX_BYTES);
    memset(&r, 0, sizeof(r));
    r.err = err;
    st = gm_json_load(json, len, 0, &r.root, err);
    if (st)
        return st;
    if (!json_is_object(r.root)) {
        json_decref(r.root);
        return gm_fail(err, GM_ERR_FORMAT, 0, "top level is not an object");
    }
    /* Multimodal configs (Llava, Mllama, Gemma-3) nest the language model in "text_config";
     * size that one when the top level has no hidden size of its own. */
    r.top = r.root;
    if (!json_object_get(r.root, "hidden_size") && !json_object_get(r.root, "n_embd") &&
        !json_object_get(r.root, "d_model") &&
        json_is_object(json_object_get(r.root, "text_config")))
        r.root = json_object_get(r.root, "text_config");
    gm_model_init(&m);
    st = parse_root(&r, &m);
    json_decref(r.top);
    if (st == GM_OK || (st == GM_ERR_FORMAT && m.incomplete))
        *out = m; /* incomplete: what the config gives, for weight files to complete */
    else if (st == GM_ERR_UNSUPPORTED && m.arch == GM_ARCH_UNKNOWN) {
        /* an architecture gpumem does not know: the caller learns its name */
        gm_model_init(out);
        memcpy(out->model_type, m.model_type, sizeof out->model_type);
    }
    return st;
}

enum gm_status gm_model_load_hf_config(const char *path, struct gm_model *out, struct gm_error *err)
{
    struct gm_buf b;
    struct stat sb;
    char file[4096];
    enum gm_status st;

    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) {
        int n = snprintf(file, sizeof(file), "%s/config.json", path);
        if (n < 0 || (size_t)n >= sizeof(file))
            return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "'%s': path too long", path);
    } else {
        size_t n = strlen(path);
        if (n >= sizeof(file))
            return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "path too long");
        memcpy(file, path, n + 1);
    }
    gm_buf_init(&b, CONFIG_MAX_BYTES);
    st = gm_buf_read_file(&b, file, err);
    if (st != GM_OK) {
        gm_buf_release(&b);
        return st;
    }
    st = gm_model_parse_hf_config(b.data ? b.data : "", b.len, out, err);
    gm_buf_release(&b);
    if (st != GM_OK)
        return gm_error_prefix(err, "%s", file);
    return GM_OK;
}
