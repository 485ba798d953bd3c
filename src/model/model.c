/* SPDX-License-Identifier: MIT */
/* model.c - validation, exact parameter counting and names for struct gm_model.
 *
 * The count walks the parameter tensors an HF implementation of each family creates,
 * shared tensors once, in the order embeddings, layers (attention, MLP, norms), the
 * decoder of an encoder-decoder, head.  The rules that matter (docs/estimate.md, "Parameter
 * counts"): tied models count the embedding once; Qwen2 has q/k/v biases; phi-2 and BERT
 * have biases everywhere, phi-2 also on lm_head; GPT-2 and BERT have learned positions;
 * gemma-2 has four norms per layer; MoE layers hold n_experts MLPs plus a router, some
 * also shared experts, and MoE models may keep their first layers dense; MLA attention
 * (DeepSeek) projects queries and keys/values through low-rank latents; an encoder-decoder
 * has a decoder whose layers add cross-attention.  Every matrix weight is also recorded by
 * shape and role (struct gm_linear_class): what a weight format quantises.  All arithmetic
 * saturates, so absurd fields cannot wrap around. */
#include "gpumem/model.h"

#include "gpumem/units.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

void gm_model_init(struct gm_model *m)
{
    memset(m, 0, sizeof(*m));
    m->arch = GM_ARCH_UNKNOWN;
    m->head = GM_HEAD_CAUSAL_LM;
    m->norm = GM_NORM_UNKNOWN;
    m->act = GM_ACT_UNKNOWN;
    m->dtype = GM_DTYPE_UNKNOWN;
}

static const char *const arch_names[GM_ARCH__COUNT] = {
    "unknown",     "llama",   "mistral",     "mixtral",    "qwen2",      "gemma",
    "gemma2",      "phi",     "phi3",        "gpt2",       "gpt_neox",   "bert",
    "qwen3",       "roberta", "xlm-roberta", "distilbert", "deberta-v2", "modernbert",
    "t5",          "bart",    "gpt_bigcode", "falcon",     "cohere",     "gemma3",
    "starcoder2",  "olmo",    "olmo2",       "qwen2_moe",  "qwen3_moe",  "deepseek_v2",
    "deepseek_v3", "gpt_oss", "llama4",      "qwen3_next", "jamba",      "nemotron_h",
    "falcon_h1",
};

const char *gm_arch_name(enum gm_arch a)
{
    if ((int)a < 0 || a >= GM_ARCH__COUNT)
        return "unknown";
    return arch_names[a];
}

bool gm_arch_fused_qkv(enum gm_arch a)
{
    switch (a) {
    case GM_ARCH_GPT2:
    case GM_ARCH_GPT_BIGCODE:
    case GM_ARCH_GPT_NEOX:
    case GM_ARCH_FALCON:
    case GM_ARCH_PHI3:
    case GM_ARCH_MODERNBERT:
        return true;
    default:
        return false;
    }
}

bool gm_arch_hf_eager(enum gm_arch a)
{
    switch (a) {
    case GM_ARCH_T5:      /* T5Attention: matmul + position_bias, softmax, no interface */
    case GM_ARCH_GPT_OSS: /* GptOssPreTrainedModel: _supports_sdpa = False (sinks) */
        return true;
    default:
        return false;
    }
}

enum gm_hf_embed_names gm_arch_hf_embed_names(enum gm_arch a)
{
    switch (a) {
    /* huggingface/transformers: modeling_mistral.py at 005a187 (MistralModel.embed_tokens,
     * MistralForCausalLM.lm_head; Llama's and Mixtral's the same); modeling_qwen2.py and
     * modeling_phi3.py at 00d4b3d2, modeling_qwen3.py at 000c33fd (Qwen2Model, Phi3Model,
     * Qwen3Model: self.embed_tokens; the ForCausalLM classes: self.lm_head);
     * modeling_gemma.py at 0125ac68 (GemmaModel.embed_tokens, the head tied to it) */
    case GM_ARCH_LLAMA:
    case GM_ARCH_MISTRAL:
    case GM_ARCH_MIXTRAL:
    case GM_ARCH_QWEN2:
    case GM_ARCH_QWEN3:
    case GM_ARCH_PHI3:
    case GM_ARCH_GEMMA:
        return GM_HF_EMBED_NAMES_EMBED_TOKENS;
    default:
        return GM_HF_EMBED_NAMES_UNKNOWN;
    }
}

static const struct {
    enum gm_dtype t;
    const char *name; /* canonical */
    unsigned bits;
    const char *aliases; /* space-separated, matched case-insensitively */
} dtypes[] = {
    {GM_DTYPE_F32, "f32", 32, "float32 fp32 float f32"},
    {GM_DTYPE_F16, "f16", 16, "float16 fp16 half f16"},
    {GM_DTYPE_BF16, "bf16", 16, "bfloat16 bf16"},
    {GM_DTYPE_F64, "f64", 64, "float64 fp64 double f64"},
    {GM_DTYPE_F8_E4M3, "f8_e4m3", 8, "float8_e4m3fn f8_e4m3 fp8 fp8_e4m3 e4m3"},
    {GM_DTYPE_F8_E5M2, "f8_e5m2", 8, "float8_e5m2 f8_e5m2 fp8_e5m2 e5m2"},
    {GM_DTYPE_I64, "i64", 64, "int64 i64"},
    {GM_DTYPE_I32, "i32", 32, "int32 i32"},
    {GM_DTYPE_I16, "i16", 16, "int16 i16"},
    {GM_DTYPE_I8, "i8", 8, "int8 i8"},
    {GM_DTYPE_U8, "u8", 8, "uint8 u8"},
    {GM_DTYPE_BOOL, "bool", 8, "bool"},
    {GM_DTYPE_INT4, "int4", 4, "int4 i4"},
    {GM_DTYPE_NF4, "nf4", 4, "nf4"},
};

const char *gm_dtype_name(enum gm_dtype t)
{
    for (size_t i = 0; i < sizeof(dtypes) / sizeof(dtypes[0]); i++)
        if (dtypes[i].t == t)
            return dtypes[i].name;
    return "unknown";
}

unsigned gm_dtype_bits(enum gm_dtype t)
{
    for (size_t i = 0; i < sizeof(dtypes) / sizeof(dtypes[0]); i++)
        if (dtypes[i].t == t)
            return dtypes[i].bits;
    return 0;
}

/* Whether 'word' is one of the space-separated words of 'list', ignoring case. */
static bool word_in(const char *list, const char *word)
{
    size_t n = strlen(word);
    const char *p = list;
    while (*p) {
        const char *e = strchr(p, ' ');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == n && !strncasecmp(p, word, n))
            return true;
        if (!e)
            break;
        p = e + 1;
    }
    return false;
}

enum gm_dtype gm_dtype_parse(const char *s)
{
    if (!s)
        return GM_DTYPE_UNKNOWN;
    if (!strncmp(s, "torch.", 6))
        s += 6;
    for (size_t i = 0; i < sizeof(dtypes) / sizeof(dtypes[0]); i++)
        if (word_in(dtypes[i].aliases, s))
            return dtypes[i].t;
    return GM_DTYPE_UNKNOWN;
}

/* Caps on architecture fields: far above any real model, low enough that products of a
 * few of them stay meaningful (the arithmetic saturates anyway). */
#define CAP_DIM   ((uint64_t)1 << 24) /* hidden, intermediate, head_dim */
#define CAP_COUNT ((uint64_t)1 << 20) /* layers, heads, positions, experts */
#define CAP_VOCAB ((uint64_t)1 << 28)

enum gm_status gm_model_validate(const struct gm_model *m, struct gm_error *err)
{
    char missing[200] = "";
    char bad[200] = "";
#define NEED(field, key)                                                                           \
    do {                                                                                           \
        if (m->field == 0)                                                                         \
            snprintf(missing + strlen(missing), sizeof(missing) - strlen(missing), "%s%s",         \
                     missing[0] ? ", " : "", key);                                                 \
    } while (0)
#define CAP(field, key, cap)                                                                       \
    do {                                                                                           \
        if (m->field > (cap))                                                                      \
            snprintf(bad + strlen(bad), sizeof(bad) - strlen(bad), "%s%s=%llu",                    \
                     bad[0] ? ", " : "", key, (unsigned long long)m->field);                       \
    } while (0)
    NEED(hidden, "hidden_size");
    NEED(n_layers, "num_hidden_layers");
    NEED(n_heads, "num_attention_heads");
    NEED(intermediate, "intermediate_size");
    NEED(vocab, "vocab_size");
    if (missing[0])
        return gm_fail(err, GM_ERR_FORMAT, GM_NO_OFFSET, "model%s%s%s: missing fields: %s",
                       m->model_type[0] ? " type '" : "", m->model_type,
                       m->model_type[0] ? "'" : "", missing);
    CAP(hidden, "hidden_size", CAP_DIM);
    CAP(intermediate, "intermediate_size", CAP_DIM);
    CAP(head_dim, "head_dim", CAP_DIM);
    CAP(n_layers, "num_hidden_layers", CAP_COUNT);
    CAP(n_heads, "num_attention_heads", CAP_COUNT);
    CAP(n_kv_heads, "num_key_value_heads", CAP_COUNT);
    CAP(vocab, "vocab_size", CAP_VOCAB);
    CAP(n_positions_learned, "max_position_embeddings", CAP_COUNT * 16);
    CAP(n_experts, "num_local_experts", CAP_COUNT);
    CAP(n_token_types, "type_vocab_size", CAP_COUNT);
    CAP(n_decoder_layers, "num_decoder_layers", CAP_COUNT);
    CAP(kv_lora_rank, "kv_lora_rank", CAP_DIM);
    CAP(q_lora_rank, "q_lora_rank", CAP_DIM);
    CAP(moe_intermediate, "moe_intermediate_size", CAP_DIM);
    CAP(shared_intermediate, "shared_expert_intermediate_size", CAP_DIM);
    CAP(n_shared_experts, "n_shared_experts", CAP_COUNT);
    CAP(head_dim_v, "v_head_dim", CAP_DIM);
    CAP(rel_pos_rows, "position_buckets", CAP_COUNT);
    CAP(rel_attn_buckets, "relative_attention_num_buckets", CAP_COUNT);
    CAP(n_labels, "num_labels", CAP_COUNT);
    CAP(index_n_heads, "index_n_heads", CAP_COUNT);
    CAP(n_linear_layers, "num_hidden_layers", CAP_COUNT);
    CAP(lin_k_heads, "linear_num_key_heads", CAP_COUNT);
    CAP(lin_v_heads, "linear_num_value_heads", CAP_COUNT);
    CAP(lin_k_dim, "linear_key_head_dim", CAP_DIM);
    CAP(lin_v_dim, "linear_value_head_dim", CAP_DIM);
    CAP(lin_conv_kernel, "linear_conv_kernel_dim", CAP_COUNT);
    CAP(mamba_d_inner, "mamba_expand", CAP_DIM);
    CAP(mamba_heads, "mamba_num_heads", CAP_COUNT);
    CAP(mamba_groups, "mamba_n_groups", CAP_COUNT);
    CAP(mamba_d_state, "mamba_d_state", CAP_DIM);
    CAP(mamba_dt_rank, "mamba_dt_rank", CAP_DIM);
    CAP(index_head_dim, "index_head_dim", CAP_DIM);
#undef NEED
#undef CAP
    if (bad[0])
        return gm_fail(err, GM_ERR_FORMAT, GM_NO_OFFSET, "model: absurd field values: %s", bad);
    if (m->n_kv_heads == 0 || m->head_dim == 0)
        return gm_fail(err, GM_ERR_FORMAT, GM_NO_OFFSET,
                       "model: head_dim or num_key_value_heads unknown");
    if (m->n_heads % m->n_kv_heads != 0 || m->n_kv_heads > m->n_heads)
        return gm_fail(err, GM_ERR_FORMAT, GM_NO_OFFSET,
                       "model: num_attention_heads (%llu) is not a multiple of "
                       "num_key_value_heads (%llu)",
                       (unsigned long long)m->n_heads, (unsigned long long)m->n_kv_heads);
    if (m->n_experts_active > m->n_experts)
        return gm_fail(err, GM_ERR_FORMAT, GM_NO_OFFSET,
                       "model: num_experts_per_tok (%llu) exceeds num_local_experts (%llu)",
                       (unsigned long long)m->n_experts_active, (unsigned long long)m->n_experts);
    if (m->n_linear_layers > m->n_layers)
        return gm_fail(err, GM_ERR_FORMAT, GM_NO_OFFSET,
                       "model: more linear-attention layers than layers");
    if (m->mix == GM_MIX_PATTERN &&
        m->n_linear_layers + m->n_attn_layers + m->n_mlp_layers != m->n_layers)
        return gm_fail(
            err, GM_ERR_FORMAT, GM_NO_OFFSET,
            "model: the layer pattern names %llu layers, num_hidden_layers is %llu",
            (unsigned long long)(m->n_linear_layers + m->n_attn_layers + m->n_mlp_layers),
            (unsigned long long)m->n_layers);
    if (m->mamba_heads && (m->mamba_d_inner % m->mamba_heads || !m->mamba_groups))
        return gm_fail(err, GM_ERR_FORMAT, GM_NO_OFFSET,
                       "model: Mamba-2 channels (%llu) are not a multiple of its heads (%llu), "
                       "or no groups",
                       (unsigned long long)m->mamba_d_inner, (unsigned long long)m->mamba_heads);
    if (m->n_sliding_layers > m->n_layers)
        return gm_fail(err, GM_ERR_FORMAT, GM_NO_OFFSET, "model: more sliding layers than layers");
    if (m->n_dense_layers > m->n_layers)
        return gm_fail(err, GM_ERR_FORMAT, GM_NO_OFFSET,
                       "model: more dense layers (first_k_dense_replace) than layers");
    if (m->kv_lora_rank && m->qk_rope_head_dim >= m->head_dim)
        return gm_fail(err, GM_ERR_FORMAT, GM_NO_OFFSET,
                       "model: qk_rope_head_dim (%llu) must be below the query head size (%llu)",
                       (unsigned long long)m->qk_rope_head_dim, (unsigned long long)m->head_dim);
    if (m->head == GM_HEAD_SEQ2SEQ_LM && m->n_decoder_layers == 0)
        return gm_fail(err, GM_ERR_FORMAT, GM_NO_OFFSET,
                       "model: an encoder-decoder needs num_decoder_layers");
    if (m->arch == GM_ARCH_UNKNOWN)
        return gm_fail(err, GM_ERR_UNSUPPORTED, GM_NO_OFFSET,
                       "model type '%s' is not an architecture gpumem counts (the %d it knows: "
                       "gpumem estimate --list-archs); give --parameters N to size it with a "
                       "llama-like layout, or the weight files for their exact size",
                       m->model_type[0] ? m->model_type : "?", GM_ARCH__COUNT - 1);
    return GM_OK;
}

/* One parameter tensor of rows x cols (a vector: rows = 1), repeated 'copies' times, in
 * the legacy field 'field' and the role 'role'. */
static void tensor(struct gm_param_counts *c, uint64_t *field, enum gm_param_role role,
                   uint64_t rows, uint64_t cols, uint64_t copies, bool matmul)
{
    uint64_t n = gm_mul_sat(rows, cols);
    uint64_t all = gm_mul_sat(n, copies);
    if (copies == 0 || n == 0)
        return;
    *field = gm_add_sat(*field, all);
    c->by_role[role] = gm_add_sat(c->by_role[role], all);
    c->total = gm_add_sat(c->total, all);
    c->n_tensors = gm_add_sat(c->n_tensors, copies);
    if (n > c->largest_tensor)
        c->largest_tensor = n;
    if (matmul)
        c->matmul = gm_add_sat(c->matmul, all);
    /* Adafactor keeps a row and a column accumulator for a matrix, a full one for a
     * vector. */
    if (rows > 1 && cols > 1)
        c->factored_state =
            gm_add_sat(c->factored_state, gm_mul_sat(gm_add_sat(rows, cols), copies));
    else
        c->factored_state = gm_add_sat(c->factored_state, all);
}

/* Remember a matrix weight by shape and role (identical ones merged): what weight formats
 * quantise.  The table is sized for the largest layout; GM_NEVER guards it. */
static void record_linear(struct gm_param_counts *c, enum gm_param_role role, uint64_t out,
                          uint64_t in, bool bias, uint64_t copies)
{
    for (size_t i = 0; i < c->n_linears; i++) {
        struct gm_linear_class *k = &c->linears[i];
        if (k->role == role && k->in == in && k->out == out && k->bias == bias) {
            k->copies = gm_add_sat(k->copies, copies);
            return;
        }
    }
    if (c->n_linears == GM_MAX_LINEAR_CLASSES)
        return;
    c->linears[c->n_linears++] = (struct gm_linear_class){role, in, out, copies, bias};
}

/* A linear layer out x in, with an optional bias vector, repeated 'copies' times. */
static void linear(struct gm_param_counts *c, uint64_t *field, enum gm_param_role role,
                   uint64_t out, uint64_t in, bool bias, uint64_t copies)
{
    if (copies == 0 || out == 0 || in == 0)
        return;
    tensor(c, field, role, out, in, copies, true);
    if (bias)
        tensor(c, field, role, 1, out, copies, false);
    record_linear(c, role, out, in, bias, copies);
}

/* 'copies' norms over 'width' features. */
static void norm_w(struct gm_param_counts *c, const struct gm_model *m, uint64_t width,
                   uint64_t copies)
{
    if (m->norm == GM_NORM_PARAMFREE)
        return;
    tensor(c, &c->norms, GM_ROLE_NORM, 1, width, copies, false);
    if (m->norm == GM_NORM_LAYER)
        tensor(c, &c->norms, GM_ROLE_NORM, 1, width, copies, false);
}

static void norm(struct gm_param_counts *c, const struct gm_model *m, uint64_t copies)
{
    norm_w(c, m, m->hidden, copies);
}

/* The attention projections of 'L' layers (cross-attention has the same shapes). */
static void attention(struct gm_param_counts *c, const struct gm_model *m, uint64_t L)
{
    uint64_t h = m->hidden, vd = m->head_dim_v ? m->head_dim_v : m->head_dim;
    if (m->kv_lora_rank) {
        /* MLA (DeepSeek-V2/V3): q through an optional low-rank bottleneck; keys and values
         * from one latent of kv_lora_rank plus a shared rotary key of qk_rope_head_dim */
        uint64_t q = gm_mul_sat(m->n_heads, m->head_dim);
        uint64_t nope = m->head_dim - m->qk_rope_head_dim;
        if (m->q_lora_rank) {
            linear(c, &c->attention, GM_ROLE_ATTENTION, m->q_lora_rank, h, m->qkv_bias, L);
            norm_w(c, m, m->q_lora_rank, L);
            linear(c, &c->attention, GM_ROLE_ATTENTION, q, m->q_lora_rank, false, L);
        } else {
            linear(c, &c->attention, GM_ROLE_ATTENTION, q, h, false, L);
        }
        linear(c, &c->attention, GM_ROLE_ATTENTION, m->kv_lora_rank + m->qk_rope_head_dim, h,
               m->qkv_bias, L);
        norm_w(c, m, m->kv_lora_rank, L);
        linear(c, &c->attention, GM_ROLE_ATTENTION, gm_mul_sat(m->n_heads, nope + vd),
               m->kv_lora_rank, false, L);
        linear(c, &c->attention, GM_ROLE_ATTENTION, h, gm_mul_sat(m->n_heads, vd), m->out_bias, L);
        if (m->index_n_heads && m->index_head_dim) {
            /* DeepSeek-V3.2's indexer (inference/model.py Indexer): wq_b from the q latent to
             * index heads x head_dim, wk to one shared key, its LayerNorm, and weights_proj
             * (a weight per index head, kept in bf16 by the fp8 checkpoint) */
            uint64_t d = m->index_head_dim;
            linear(c, &c->attention, GM_ROLE_ATTENTION, gm_mul_sat(m->index_n_heads, d),
                   m->q_lora_rank ? m->q_lora_rank : h, false, L);
            linear(c, &c->attention, GM_ROLE_ATTENTION, d, h, false, L);
            tensor(c, &c->norms, GM_ROLE_NORM, 1, d, gm_mul_sat(L, 2), false);
            linear(c, &c->other, GM_ROLE_OTHER, m->index_n_heads, h, false, L);
        }
        return;
    }
    linear(c, &c->attention, GM_ROLE_ATTENTION,
           gm_mul_sat(m->n_heads, m->head_dim) * (m->attn_output_gate ? 2 : 1), h, m->qkv_bias, L);
    linear(c, &c->attention, GM_ROLE_ATTENTION, gm_mul_sat(m->n_kv_heads, m->head_dim), h,
           m->qkv_bias, L);
    linear(c, &c->attention, GM_ROLE_ATTENTION, gm_mul_sat(m->n_kv_heads, vd), h, m->qkv_bias, L);
    linear(c, &c->attention, GM_ROLE_ATTENTION, h, gm_mul_sat(m->n_heads, vd), m->out_bias, L);
    if (m->attn_sinks) /* gpt-oss: one sink logit per query head (self_attn.sinks) */
        tensor(c, &c->attention, GM_ROLE_ATTENTION, 1, m->n_heads, L, false);
}

/* One MLP of width I, 'copies' times; returns the parameters of one. */
static uint64_t ffn(struct gm_param_counts *c, const struct gm_model *m, uint64_t I,
                    uint64_t copies)
{
    uint64_t before = c->mlp;
    if (!copies || !I)
        return 0;
    if (m->gated_mlp) {
        linear(c, &c->mlp, GM_ROLE_MLP, I, m->hidden, m->mlp_bias, copies); /* gate */
        linear(c, &c->mlp, GM_ROLE_MLP, I, m->hidden, m->mlp_bias, copies); /* up */
    } else {
        linear(c, &c->mlp, GM_ROLE_MLP, I, m->hidden, m->mlp_bias, copies); /* fc1 */
    }
    linear(c, &c->mlp, GM_ROLE_MLP, m->hidden, I, m->mlp_bias, copies); /* down / fc2 */
    return (c->mlp - before) / copies;
}

/* The MLPs of 'L' layers: dense, or routed experts with a router (and shared experts).
 * *routed receives the parameters of all routed experts, *expert those of one. */
static void mlps(struct gm_param_counts *c, const struct gm_model *m, uint64_t L, uint64_t *routed,
                 uint64_t *expert)
{
    uint64_t dense = m->n_experts ? (m->n_dense_layers < L ? m->n_dense_layers : L) : L;
    uint64_t moe = L - dense, Ie = m->moe_intermediate ? m->moe_intermediate : m->intermediate;
    ffn(c, m, m->intermediate, dense);
    *expert = ffn(c, m, Ie, gm_mul_sat(moe, m->n_experts));
    *routed = gm_mul_sat(*expert, gm_mul_sat(moe, m->n_experts));
    if (!moe || !m->n_experts)
        return;
    linear(c, &c->mlp, GM_ROLE_ROUTER, m->n_experts, m->hidden, false, moe);
    if (m->router_bias)
        tensor(c, &c->mlp, GM_ROLE_ROUTER, 1, m->n_experts, moe, false);
    if (m->n_shared_experts)
        ffn(c, m, gm_mul_sat(Ie, m->n_shared_experts), moe);
    if (m->shared_intermediate)
        ffn(c, m, m->shared_intermediate, moe);
    if (m->shared_expert_gate)
        linear(c, &c->mlp, GM_ROLE_ROUTER, 1, m->hidden, false, moe);
}

/* A vision tower and its projector into the language model (GM_ROLE_OTHER):
 *   CLIP (transformers CLIPVisionModel + LlavaMultiModalProjector): patch conv (3 p^2 hv, no
 *     bias), class embedding, (n + 1) learned positions, pre- and post-LayerNorm, per layer
 *     q/k/v/o with biases, two LayerNorms, fc1/fc2 with biases; projector linear_1 (hv -> h),
 *     linear_2 (h -> h), with biases;
 *   Qwen-VL (Qwen2VisionTransformerPretrainedModel, Qwen2_5_Vision...): a bias-free 3-D patch
 *     conv (3 t p^2 hv), per block two norms, fused qkv and proj with biases, SwiGLU (2.5) or
 *     fc1/fc2 (2) with biases; the merger's norm, then hv m^2 -> hv m^2 -> h with biases. */
static void vision(struct gm_param_counts *c, const struct gm_model *m)
{
    const struct gm_vision *v = &m->vision;
    uint64_t hv = v->hidden, L = v->layers, I = v->intermediate, side;
    uint64_t norm_elems = v->rms_norm ? 1 : 2, cat;
    if (v->kind == GM_VISION_NONE || !hv || !v->patch)
        return;
    if (v->kind == GM_VISION_CLIP) {
        side = v->image_size / v->patch;
        tensor(c, &c->other, GM_ROLE_OTHER, 3 * v->patch * v->patch, hv, 1, false);
        tensor(c, &c->other, GM_ROLE_OTHER, 1, hv, 1, false);
        tensor(c, &c->other, GM_ROLE_OTHER, gm_add_sat(gm_mul_sat(side, side), 1), hv, 1, false);
        tensor(c, &c->other, GM_ROLE_OTHER, 1, hv, gm_mul_sat(2, 2), false); /* pre, post LN */
        linear(c, &c->other, GM_ROLE_OTHER, hv, hv, true, gm_mul_sat(4, L));
        tensor(c, &c->other, GM_ROLE_OTHER, 1, hv, gm_mul_sat(4, L), false);
        linear(c, &c->other, GM_ROLE_OTHER, I, hv, true, L);
        linear(c, &c->other, GM_ROLE_OTHER, hv, I, true, L);
        linear(c, &c->other, GM_ROLE_OTHER, m->hidden, hv, true, 1);
        linear(c, &c->other, GM_ROLE_OTHER, m->hidden, m->hidden, true, 1);
        return;
    }
    tensor(c, &c->other, GM_ROLE_OTHER, 3 * v->temporal * v->patch * v->patch, hv, 1, false);
    tensor(c, &c->other, GM_ROLE_OTHER, 1, hv, gm_mul_sat(2 * norm_elems, L), false);
    linear(c, &c->other, GM_ROLE_OTHER, 3 * hv, hv, true, L);
    linear(c, &c->other, GM_ROLE_OTHER, hv, hv, true, L);
    linear(c, &c->other, GM_ROLE_OTHER, I, hv, true, v->gated_mlp ? 2 * L : L);
    linear(c, &c->other, GM_ROLE_OTHER, hv, I, true, L);
    cat = gm_mul_sat(hv, v->merge * v->merge);
    tensor(c, &c->other, GM_ROLE_OTHER, 1, hv, norm_elems, false);
    linear(c, &c->other, GM_ROLE_OTHER, cat, cat, true, 1);
    linear(c, &c->other, GM_ROLE_OTHER, m->hidden, cat, true, 1);
}

/* Qwen3-Next's Gated DeltaNet layers (modular_qwen3_next.py Qwen3NextGatedDeltaNet):
 * in_proj_qkvz h -> 2 key_dim + 2 value_dim, in_proj_ba h -> 2 value heads, a depthwise
 * conv1d over the 2 key_dim + value_dim channels without bias, dt_bias and A_log per value
 * head, a gated RMSNorm of head_v_dim, out_proj value_dim -> h. */
static void linear_attention(struct gm_param_counts *c, const struct gm_model *m, uint64_t L)
{
    uint64_t kd = gm_mul_sat(m->lin_k_heads, m->lin_k_dim);
    uint64_t vd = gm_mul_sat(m->lin_v_heads, m->lin_v_dim), h = m->hidden;
    if (!L)
        return;
    if (m->mamba_heads) {
        /* Mamba-2 (modeling_nemotron_h.py NemotronHMamba2Mixer, modeling_falcon_h1.py
         * FalconH1Mixer): in_proj h -> gate d_inner + conv channels + one dt per head, no bias;
         * a depthwise conv1d with bias over d_inner + 2 groups x d_state channels (x, B, C);
         * dt_bias, A_log and D per head; the gated RMSNorm of d_inner (Falcon-H1 when
         * mamba_rms_norm); out_proj d_inner -> h */
        uint64_t di = m->mamba_d_inner, nh = m->mamba_heads;
        uint64_t conv = di + 2 * m->mamba_groups * m->mamba_d_state;
        linear(c, &c->attention, GM_ROLE_ATTENTION, di + conv + nh, h, false, L);
        tensor(c, &c->attention, GM_ROLE_ATTENTION, conv, m->lin_conv_kernel + 1, L, false);
        tensor(c, &c->attention, GM_ROLE_ATTENTION, 1, 3 * nh, L, false);
        if (m->mamba_gated_norm)
            tensor(c, &c->norms, GM_ROLE_NORM, 1, di, L, false);
        linear(c, &c->attention, GM_ROLE_ATTENTION, h, di, false, L);
        return;
    }
    if (m->mamba_d_inner) {
        /* Jamba's Mamba mixer (modeling_jamba.py JambaMambaMixer): in_proj h -> 2 d_inner,
         * a depthwise conv1d with bias, x_proj d_inner -> dt_rank + 2 d_state, dt_proj
         * dt_rank -> d_inner with bias, A_log d_inner x d_state, D, out_proj d_inner -> h,
         * RMSNorms on dt (dt_rank), B and C (d_state) */
        uint64_t di = m->mamba_d_inner, ds = m->mamba_d_state, r = m->mamba_dt_rank;
        linear(c, &c->attention, GM_ROLE_ATTENTION, 2 * di, h, false, L);
        tensor(c, &c->attention, GM_ROLE_ATTENTION, di, m->lin_conv_kernel + 1, L, false);
        linear(c, &c->attention, GM_ROLE_ATTENTION, r + 2 * ds, di, false, L);
        linear(c, &c->attention, GM_ROLE_ATTENTION, di, r, true, L);
        tensor(c, &c->attention, GM_ROLE_ATTENTION, di, ds + 1, L, false);
        linear(c, &c->attention, GM_ROLE_ATTENTION, h, di, false, L);
        tensor(c, &c->norms, GM_ROLE_NORM, 1, r + 2 * ds, L, false);
        return;
    }
    linear(c, &c->attention, GM_ROLE_ATTENTION, 2 * kd + 2 * vd, h, false, L);
    linear(c, &c->attention, GM_ROLE_ATTENTION, 2 * m->lin_v_heads, h, false, L);
    tensor(c, &c->attention, GM_ROLE_ATTENTION, 2 * kd + vd, m->lin_conv_kernel, L, false);
    tensor(c, &c->attention, GM_ROLE_ATTENTION, 1, m->lin_v_heads, gm_mul_sat(2, L), false);
    tensor(c, &c->norms, GM_ROLE_NORM, 1, m->lin_v_dim, L, false);
    linear(c, &c->attention, GM_ROLE_ATTENTION, h, vd, false, L);
}

void gm_model_linear_state(const struct gm_model *m, bool vllm, uint64_t *recurrent, uint64_t *conv)
{
    uint64_t kd = m->lin_k_heads * m->lin_k_dim, vd = m->lin_v_heads * m->lin_v_dim;
    uint64_t k = m->lin_conv_kernel;
    *recurrent = *conv = 0;
    if (!m->n_linear_layers)
        return;
    if (m->mamba_d_inner) {
        /* one rule for Mamba-1 and -2: d_inner x d_state of recurrent state (Mamba-2: heads x
         * head dim x d_state), the convolution over x and, in Mamba-2, each group's B and C */
        *recurrent = gm_mul_sat(m->mamba_d_inner, m->mamba_d_state);
        *conv = gm_mul_sat(m->mamba_d_inner + 2 * m->mamba_groups * m->mamba_d_state,
                           vllm ? (k ? k - 1 : 0) : k);
        return;
    }
    *recurrent = m->lin_v_heads * m->lin_k_dim * m->lin_v_dim;
    *conv = (2 * kd + vd) * (vllm ? (k ? k - 1 : 0) : k);
}

uint64_t gm_model_attention_layers(const struct gm_model *m)
{
    switch (m->mix) {
    case GM_MIX_PARALLEL:
        return m->n_layers;
    case GM_MIX_PATTERN:
        return m->n_attn_layers;
    default:
        return m->n_layers > m->n_linear_layers ? m->n_layers - m->n_linear_layers : 0;
    }
}

uint64_t gm_model_mlp_layers(const struct gm_model *m)
{
    return m->mix == GM_MIX_PATTERN ? m->n_mlp_layers : m->n_layers;
}

/* Python's round(): halves to the even neighbour. */
static uint64_t round_half_even(uint64_t num, uint64_t den)
{
    uint64_t q = num / den, r = num % den;
    return 2 * r > den || (2 * r == den && (q & 1)) ? q + 1 : q;
}

uint64_t gm_model_image_tokens(const struct gm_model *m, uint64_t w, uint64_t h, uint64_t *patches)
{
    const struct gm_vision *v = &m->vision;
    uint64_t f, hb, wb, side;
    if (patches)
        *patches = 0;
    if (v->kind == GM_VISION_NONE || !v->patch)
        return 0;
    if (v->kind == GM_VISION_CLIP) {
        side = v->image_size / v->patch;
        if (patches)
            *patches = side * side + 1;
        return side * side; /* vision_feature_select_strategy "default": the class token out */
    }
    /* image_processing_qwen2_vl.py smart_resize: sides rounded to multiples of patch x
     * merge, the area kept within min_pixels 56 x 56 and max_pixels 28 x 28 x 16384 */
    f = v->patch * (v->merge ? v->merge : 1);
    if (!w || !h || w > ((uint64_t)1 << 20) || h > ((uint64_t)1 << 20))
        return 0;
    hb = round_half_even(h, f) * f;
    wb = round_half_even(w, f) * f;
    if (hb * wb > 12845056ull) {
        double beta = sqrt((double)h * (double)w / 12845056.0);
        hb = (uint64_t)floor((double)h / beta / (double)f) * f;
        wb = (uint64_t)floor((double)w / beta / (double)f) * f;
    } else if (hb * wb < 3136) {
        double beta = sqrt(3136.0 / ((double)h * (double)w));
        hb = (uint64_t)ceil((double)h * beta / (double)f) * f;
        wb = (uint64_t)ceil((double)w * beta / (double)f) * f;
    }
    if (patches)
        *patches = (hb / v->patch) * (wb / v->patch);
    return (hb / f) * (wb / f);
}

/* Norms of 'L' layers with 'per_layer' each, plus q/k norms. */
static void layer_norms(struct gm_param_counts *c, const struct gm_model *m, uint64_t L,
                        unsigned per_layer)
{
    uint64_t n = gm_mul_sat(L, per_layer);
    if (m->no_first_attn_norm && n)
        n--;
    norm(c, m, n);
    uint64_t La = gm_model_attention_layers(m);
    if (m->qk_norm_full) {
        norm_w(c, m, gm_mul_sat(m->n_heads, m->head_dim), L);
        norm_w(c, m, gm_mul_sat(m->n_kv_heads, m->head_dim), L);
    } else if (m->qk_norm) {
        tensor(c, &c->norms, GM_ROLE_NORM, 1, m->head_dim, gm_mul_sat(La, 2), false);
    }
}

enum gm_status gm_model_count_params(const struct gm_model *m, struct gm_param_counts *out,
                                     struct gm_error *err)
{
    struct gm_param_counts c;
    enum gm_status st = gm_model_validate(m, err);
    bool seq2seq = m->head == GM_HEAD_SEQ2SEQ_LM;
    uint64_t stacks = seq2seq ? 2 : 1, L = m->n_layers, h = m->hidden, routed = 0, expert = 0;
    uint64_t r2 = 0, e2 = 0;
    if (st != GM_OK)
        return st;
    memset(&c, 0, sizeof(c));

    /* Embeddings: the token table is a lookup, not a matmul, unless it doubles as the
     * tied lm_head; autocast then casts it for the logits product.  An encoder-decoder
     * shares one table between its stacks; learned positions and the embedding norm are
     * per stack (BART). */
    tensor(&c, &c.embedding, GM_ROLE_EMBEDDING, m->vocab, h, 1,
           m->tied_embeddings && m->head != GM_HEAD_ENCODER);
    tensor(&c, &c.positions, GM_ROLE_EMBEDDING, m->n_positions_learned, h, stacks, false);
    tensor(&c, &c.positions, GM_ROLE_EMBEDDING, m->n_token_types, h, 1, false);
    if (m->emb_norm)
        norm(&c, m, stacks);
    if (m->rel_pos_rows) { /* DeBERTa-v2: one relative-position table and its LayerNorm */
        tensor(&c, &c.other, GM_ROLE_OTHER, m->rel_pos_rows, h, 1, false);
        norm(&c, m, 1);
    }
    tensor(&c, &c.other, GM_ROLE_OTHER, m->rel_attn_buckets, m->n_heads, stacks, false);

    /* The layers (the encoder's, for an encoder-decoder); linear-attention layers have their
     * own mixer instead of attention. */
    attention(&c, m, gm_model_attention_layers(m));
    linear_attention(&c, m, m->n_linear_layers < L ? m->n_linear_layers : L);
    mlps(&c, m, gm_model_mlp_layers(m), &routed, &expert);
    layer_norms(&c, m, L, m->norms_per_layer);
    if (m->final_norm)
        norm(&c, m, stacks);
    c.encoder = seq2seq ? c.attention + c.mlp : 0;

    /* The decoder of an encoder-decoder: self-attention, cross-attention over the
     * encoder's output, the MLP, one norm more per layer. */
    if (seq2seq) {
        attention(&c, m, gm_mul_sat(m->n_decoder_layers, 2));
        mlps(&c, m, m->n_decoder_layers, &r2, &e2);
        layer_norms(&c, m, m->n_decoder_layers, m->norms_per_layer + 1);
        routed = gm_add_sat(routed, r2);
    }

    vision(&c, m);

    /* Head. */
    if (m->head != GM_HEAD_ENCODER && !m->tied_embeddings)
        linear(&c, &c.lm_head, GM_ROLE_LM_HEAD, m->vocab, h, m->lm_head_bias, 1);
    if (m->head == GM_HEAD_ENCODER) {
        if (m->pooler)
            linear(&c, &c.other, GM_ROLE_OTHER, h, h, true, 1);
        if (m->n_labels && m->cls_dense)
            linear(&c, &c.other, GM_ROLE_OTHER, h, h, true, 1);
        linear(&c, &c.other, GM_ROLE_OTHER, m->n_labels, h, true, 1);
    }

    /* Per-token active parameters: of the routed experts only the top-k run. */
    c.active = c.total;
    if (m->n_experts && m->n_experts_active && L > m->n_dense_layers)
        c.active = c.total - routed +
                   gm_mul_sat(gm_mul_sat(expert, m->n_experts_active),
                              (L - m->n_dense_layers) + (seq2seq ? m->n_decoder_layers : 0));
    *out = c;
    return GM_OK;
}
