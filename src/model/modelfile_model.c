/* SPDX-License-Identifier: MIT */
/* modelfile_model.c - turn a weight-file summary into the struct gm_model the estimator
 * uses.  GGUF carries its architecture in metadata keys (llama.cpp's names); safetensors
 * files carry none, so the config.json beside them is read.
 *
 * The tensors' shapes fill in what the metadata leaves out, as llama.cpp's loader does:
 * the vocabulary from the token embedding's rows (GGUF: also the tokenizer's token list),
 * the FFN width from the first layer's up projection, the KV heads from its key projection,
 * the hidden size from the embedding's width, the layers from the highest layer index in
 * the tensor names.  A safetensors checkpoint whose embedding has more rows than its
 * config's vocab_size (a tokenizer resized for fine-tuning) is sized by its rows.
 *
 * Packed checkpoints: a GPTQ / AWQ / compressed-tensors qweight element holds 32 / bits
 * parameters and a bitsandbytes 4-bit weight byte two; their scales, zeros, g_idx and
 * absmax are not parameters.  n_params_file counts the unpacked parameters.
 *
 * An architecture gpumem does not know is still sized from its files: n_params_file and
 * weight_bytes_file are exact, and the layout is marked generic (hidden and layers from
 * the tensors, the rest a GPT-2-style default) for the estimator's generic rule. */
#include "model/modelfile_int.h"

#include "gpumem/text.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int gm_modelfile_dominant_dtype(const struct gm_modelfile *mf)
{
    int best = -1;
    for (size_t i = 0; i < mf->n_dtypes; i++)
        if (best < 0 || mf->dtypes[i].n_bytes > mf->dtypes[best].n_bytes)
            best = (int)i;
    return best;
}

const struct gm_modelfile_tensor *gm_modelfile_find_tensor(const struct gm_modelfile *mf,
                                                           const char *name)
{
    for (size_t i = 0; i < mf->n_tensors; i++)
        if (strcmp(mf->tensors[i].name, name) == 0)
            return &mf->tensors[i];
    return NULL;
}

bool gm_modelfile_has_tensor(const struct gm_modelfile *mf, const char *name)
{
    return gm_modelfile_find_tensor(mf, name) != NULL;
}

/* Plain float types map to a gm_dtype; quantised ones stay unknown (their bytes are in
 * weight_bytes_file). */
static enum gm_dtype plain_dtype(const char *name)
{
    static const struct {
        const char *name;
        enum gm_dtype t;
    } map[] = {
        {"F32", GM_DTYPE_F32}, {"F16", GM_DTYPE_F16},         {"BF16", GM_DTYPE_BF16},
        {"F64", GM_DTYPE_F64}, {"F8_E4M3", GM_DTYPE_F8_E4M3}, {"F8_E5M2", GM_DTYPE_F8_E5M2},
    };
    for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
        if (strcmp(map[i].name, name) == 0)
            return map[i].t;
    return GM_DTYPE_UNKNOWN;
}

/* ---- tensor names and shapes ---- */

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* The first tensor whose name ends with one of 'suffixes' (NULL-terminated). */
static const struct gm_modelfile_tensor *find_suffix(const struct gm_modelfile *mf,
                                                     const char *const *suffixes)
{
    for (size_t k = 0; suffixes[k]; k++)
        for (size_t i = 0; i < mf->n_tensors; i++)
            if (ends_with(mf->tensors[i].name, suffixes[k]))
                return &mf->tensors[i];
    return NULL;
}

/* Dimension 'i' of a tensor in safetensors order (outermost first): GGUF's ne[] is
 * innermost first. */
static uint64_t dim(const struct gm_modelfile *mf, const struct gm_modelfile_tensor *t, uint32_t i)
{
    if (!t || i >= t->n_dims)
        return 0;
    return mf->format == GM_MODELFILE_GGUF ? t->shape[t->n_dims - 1 - i] : t->shape[i];
}

/* The number of layers: one more than the highest index after a "layers." / "h." /
 * "blk." / "block." / "blocks." / "layer." part of a tensor name. */
static uint64_t layers_in_names(const struct gm_modelfile *mf)
{
    static const char *const parts[] = {"layers.", "h.", "blk.", "block.", "blocks.", "layer."};
    uint64_t n = 0;
    for (size_t i = 0; i < mf->n_tensors; i++) {
        const char *name = mf->tensors[i].name;
        for (size_t k = 0; k < sizeof parts / sizeof parts[0]; k++) {
            const char *p = strstr(name, parts[k]);
            if (!p || (p > name && p[-1] != '.'))
                continue;
            p += strlen(parts[k]);
            if (isdigit((unsigned char)*p)) {
                uint64_t v = strtoull(p, NULL, 10);
                if (v < ((uint64_t)1 << 20) && v + 1 > n)
                    n = v + 1;
            }
        }
    }
    return n;
}

static const char *const embed_names[] = {"embed_tokens.weight",    "wte.weight",
                                          "word_embeddings.weight", "embed_in.weight",
                                          "token_embd.weight",      "shared.weight",
                                          "tok_embeddings.weight",  "embeddings.weight",
                                          "embedding.weight",       NULL};
static const char *const up_names[] = {"layers.0.mlp.up_proj.weight",  "h.0.mlp.c_fc.weight",
                                       "blk.0.ffn_up.weight",          "layers.0.mlp.fc1.weight",
                                       "h.0.mlp.dense_h_to_4h.weight", NULL};
static const char *const k_names[] = {"layers.0.self_attn.k_proj.weight", "blk.0.attn_k.weight",
                                      NULL};
static const char *const q_names[] = {"layers.0.self_attn.q_proj.weight", "blk.0.attn_q.weight",
                                      NULL};

/* What the metadata left out, from the shapes (GM_FROM_SHAPES_* flags say which). */
static void fill_from_shapes(const struct gm_modelfile *mf, struct gm_model *m)
{
    const struct gm_modelfile_tensor *emb = find_suffix(mf, embed_names);
    const struct gm_modelfile_tensor *up = find_suffix(mf, up_names);
    const struct gm_modelfile_tensor *k = find_suffix(mf, k_names);
    const struct gm_modelfile_tensor *q = find_suffix(mf, q_names);
    uint64_t rows = dim(mf, emb, 0), width = dim(mf, emb, 1);
    if (emb && emb->n_dims == 2 && rows && (!m->vocab || rows > m->vocab)) {
        m->vocab = rows;
        m->from_shapes |= GM_FROM_SHAPES_VOCAB;
    }
    if (!m->hidden && emb && width) {
        m->hidden = width;
        m->from_shapes |= GM_FROM_SHAPES_HIDDEN;
    }
    if (!m->n_layers && (m->n_layers = layers_in_names(mf)) != 0)
        m->from_shapes |= GM_FROM_SHAPES_LAYERS;
    if (!m->intermediate && up && up->n_dims == 2 && dim(mf, up, 0)) {
        m->intermediate = dim(mf, up, 0);
        m->from_shapes |= GM_FROM_SHAPES_FFN;
    }
    if (!m->head_dim && q && m->n_heads && dim(mf, q, 0) % m->n_heads == 0) {
        m->head_dim = dim(mf, q, 0) / m->n_heads;
        if (m->hidden != m->head_dim * m->n_heads) /* not the default hidden / heads */
            m->from_shapes |= GM_FROM_SHAPES_HEAD_DIM;
    }
    if (!m->n_kv_heads && k && m->head_dim && dim(mf, k, 0) % m->head_dim == 0) {
        m->n_kv_heads = dim(mf, k, 0) / m->head_dim;
        m->from_shapes |= GM_FROM_SHAPES_KV_HEADS;
    }
}

/* Parameters of a packed checkpoint: qweight elements hold 32 / bits values, a
 * bitsandbytes 4-bit weight byte two; scales, zeros, g_idx, absmax and quantisation
 * state are not parameters. */
static uint64_t unpacked_params(const struct gm_modelfile *mf, const struct gm_quant *q)
{
    static const char *const constants[] = {".scales",
                                            ".qzeros",
                                            ".g_idx",
                                            ".absmax",
                                            ".quant_map",
                                            ".SCB",
                                            ".weight_scale",
                                            ".input_scale",
                                            ".weight_zero_point",
                                            ".weight_shape",
                                            ".weight_scale_inv",
                                            ".nested_absmax",
                                            ".nested_quant_map",
                                            NULL};
    uint64_t n = 0;
    for (size_t i = 0; i < mf->n_tensors; i++) {
        const struct gm_modelfile_tensor *t = &mf->tensors[i];
        bool constant = strstr(t->name, ".quant_state.") != NULL;
        for (size_t k = 0; constants[k] && !constant; k++)
            constant = ends_with(t->name, constants[k]);
        if (constant)
            continue;
        if (ends_with(t->name, ".qweight") || ends_with(t->name, ".weight_packed"))
            n = gm_add_sat(n, gm_mul_sat(t->n_elements, 32 / (q->bits ? q->bits : 4)));
        else if ((q->method == GM_QUANT_BNB_NF4 || q->method == GM_QUANT_BNB_FP4) &&
                 strcmp(mf->dtypes[t->dtype].name, "U8") == 0)
            n = gm_add_sat(n, gm_mul_sat(t->n_elements, 2));
        else
            n = gm_add_sat(n, t->n_elements);
    }
    return n;
}

/* A layout for an architecture gpumem does not know: width and layers from the tensors,
 * the rest a GPT-2-style default (the estimator's generic rule, stated as such). */
static void generic_layout(const struct gm_modelfile *mf, struct gm_model *m)
{
    m->arch = GM_ARCH_UNKNOWN;
    m->generic = true;
    m->hidden = 0;
    m->n_layers = 0;
    m->intermediate = 0;
    fill_from_shapes(mf, m);
    if (!m->intermediate)
        m->intermediate = 4 * m->hidden;
    m->n_heads = m->hidden >= 64 ? m->hidden / 64 : 1;
    m->n_kv_heads = m->n_heads;
    m->head_dim = m->hidden / m->n_heads;
    m->head = GM_HEAD_CAUSAL_LM;
    m->norm = GM_NORM_LAYER;
    m->norms_per_layer = 2;
    m->final_norm = true;
    m->act = GM_ACT_GELU;
    m->gated_mlp = false;
}

static const struct {
    const char *gguf;
    enum gm_arch arch;
} gguf_archs[] = {
    {"llama", GM_ARCH_LLAMA},
    {"mistral", GM_ARCH_MISTRAL},
    {"qwen2", GM_ARCH_QWEN2},
    {"gemma", GM_ARCH_GEMMA},
    {"gemma2", GM_ARCH_GEMMA2},
    {"phi2", GM_ARCH_PHI},
    {"phi3", GM_ARCH_PHI3},
    {"gpt2", GM_ARCH_GPT2},
    {"gptneox", GM_ARCH_GPT_NEOX},
    {"bert", GM_ARCH_BERT},
    /* ---- the other layouts, by llama.cpp's LLM_ARCH names ---- */
    {"qwen3", GM_ARCH_QWEN3},
    {"gemma3", GM_ARCH_GEMMA3},
    {"starcoder", GM_ARCH_GPT_BIGCODE},
    {"starcoder2", GM_ARCH_STARCODER2},
    {"falcon", GM_ARCH_FALCON},
    {"command-r", GM_ARCH_COHERE},
    {"olmo", GM_ARCH_OLMO},
    {"olmo2", GM_ARCH_OLMO2},
    {"qwen2moe", GM_ARCH_QWEN2_MOE},
    {"qwen3moe", GM_ARCH_QWEN3_MOE},
    {"deepseek2", GM_ARCH_DEEPSEEK_V2},
    {"t5", GM_ARCH_T5},
};

/* MLA and MoE keys of a GGUF (deepseek2, qwen2moe, qwen3moe). */
static void gguf_moe_mla(const struct gm_modelfile *mf, struct gm_model *m)
{
    const struct gm_modelfile_arch *a = &mf->arch;
    m->n_dense_layers = a->n_dense_layers;
    m->n_shared_experts = a->n_shared_experts;
    if (a->n_experts && a->expert_ffn)
        m->moe_intermediate = a->expert_ffn;
    if (m->arch == GM_ARCH_QWEN2_MOE && a->shared_expert_ffn) {
        m->shared_intermediate = a->shared_expert_ffn;
        m->shared_expert_gate = gm_modelfile_has_tensor(mf, "blk.0.ffn_gate_inp_shexp.weight");
        m->n_shared_experts = 0;
    }
    if (m->arch == GM_ARCH_DEEPSEEK_V2 && a->kv_lora_rank) {
        /* a GGUF converted for MLA stores the latent sizes in key_length / value_length and
         * the per-head ones in key_length_mla / value_length_mla */
        m->kv_lora_rank = a->kv_lora_rank;
        m->q_lora_rank = a->q_lora_rank;
        m->qk_rope_head_dim = a->rope_dims;
        m->head_dim = a->head_dim_mla ? a->head_dim_mla : a->head_dim;
        m->head_dim_v = a->head_dim_v_mla ? a->head_dim_v_mla : a->head_dim_v;
        m->n_kv_heads = m->n_heads;
        m->router_bias = gm_modelfile_has_tensor(mf, "blk.3.exp_probs_b.bias") ||
                         gm_modelfile_has_tensor(mf, "blk.1.exp_probs_b.bias");
        if (m->router_bias)
            m->arch = GM_ARCH_DEEPSEEK_V3;
    }
}

static enum gm_status from_gguf(const struct gm_modelfile *mf, struct gm_model *m,
                                struct gm_error *err)
{
    const struct gm_modelfile_arch *a = &mf->arch;
    if (!mf->has_arch)
        return gm_fail(err, GM_ERR_FORMAT, GM_NO_OFFSET,
                       "GGUF file has no general.architecture key");
    /* display text: the names come raw from the file (model_name is escaped already) */
    gm_text_escape(m->name, sizeof m->name, mf->model_name[0] ? mf->model_name : a->name);
    gm_text_escape(m->model_type, sizeof m->model_type, a->name);
    m->arch = GM_ARCH_UNKNOWN;
    for (size_t i = 0; i < sizeof(gguf_archs) / sizeof(gguf_archs[0]); i++)
        if (strcmp(gguf_archs[i].gguf, a->name) == 0)
            m->arch = gguf_archs[i].arch;
    if (m->arch == GM_ARCH_UNKNOWN) {
        m->vocab = a->vocab;
        m->hidden = a->hidden;
        m->n_layers = a->n_layers;
        m->intermediate = a->ffn;
        m->max_positions = a->context_length;
        generic_layout(mf, m);
        return GM_OK;
    }
    if (a->n_layers == 0 || a->hidden == 0 || a->n_heads == 0)
        return gm_fail(err, GM_ERR_FORMAT, GM_NO_OFFSET, "GGUF metadata lacks %s%s%s",
                       a->n_layers ? "" : "block_count ", a->hidden ? "" : "embedding_length ",
                       a->n_heads ? "" : "attention.head_count");
    if (m->arch == GM_ARCH_LLAMA && a->n_experts > 0)
        m->arch = GM_ARCH_MIXTRAL;
    m->head = m->arch == GM_ARCH_BERT ? GM_HEAD_ENCODER
              : m->arch == GM_ARCH_T5 ? GM_HEAD_SEQ2SEQ_LM
                                      : GM_HEAD_CAUSAL_LM;
    m->hidden = a->hidden;
    m->n_layers = a->n_layers;
    m->n_heads = a->n_heads;
    m->n_kv_heads = a->n_kv_heads;
    m->head_dim = a->head_dim;
    m->intermediate = a->n_experts && a->expert_ffn && !a->n_dense_layers ? a->expert_ffn : a->ffn;
    m->vocab = a->vocab;
    fill_from_shapes(mf, m); /* vocab, FFN, head_dim and KV heads the keys left out */
    if (!m->n_kv_heads)
        m->n_kv_heads = a->n_heads;
    if (!m->head_dim)
        m->head_dim = a->hidden / a->n_heads;
    m->max_positions = a->context_length;
    m->sliding_window = a->sliding_window;
    m->n_sliding_layers = a->sliding_window ? a->n_layers : 0;
    if (m->arch == GM_ARCH_GEMMA2 && a->sliding_window)
        m->n_sliding_layers = a->n_layers / 2; /* alternating local/global layers */
    if (m->arch == GM_ARCH_GEMMA3 && a->sliding_window)
        m->n_sliding_layers = a->n_layers - a->n_layers / 6; /* llama.cpp: swa pattern 6 */
    m->n_experts = a->n_experts;
    m->n_experts_active = a->n_experts_used;
    gguf_moe_mla(mf, m);
    m->norms_per_layer = (m->arch == GM_ARCH_GEMMA2 || m->arch == GM_ARCH_GEMMA3) ? 4
                         : (m->arch == GM_ARCH_PHI || m->arch == GM_ARCH_COHERE)  ? 1
                                                                                  : 2;
    m->norm = (m->arch == GM_ARCH_PHI || m->arch == GM_ARCH_GPT2 || m->arch == GM_ARCH_GPT_NEOX ||
               m->arch == GM_ARCH_BERT || m->arch == GM_ARCH_GPT_BIGCODE ||
               m->arch == GM_ARCH_STARCODER2 || m->arch == GM_ARCH_FALCON)
                  ? GM_NORM_LAYER
                  : GM_NORM_RMS;
    m->act = m->norm == GM_NORM_LAYER ? GM_ACT_GELU : GM_ACT_SILU;
    m->tied_embeddings = !gm_modelfile_has_tensor(mf, "output.weight");
    m->gated_mlp = gm_modelfile_has_tensor(mf, "blk.0.ffn_gate.weight") ||
                   gm_modelfile_has_tensor(mf, "blk.0.ffn_gate_exps.weight") ||
                   gm_modelfile_has_tensor(mf, "blk.0.ffn_gate_up.weight");
    m->qkv_bias = gm_modelfile_has_tensor(mf, "blk.0.attn_q.bias") ||
                  gm_modelfile_has_tensor(mf, "blk.0.attn_qkv.bias");
    m->out_bias = gm_modelfile_has_tensor(mf, "blk.0.attn_output.bias");
    m->mlp_bias = gm_modelfile_has_tensor(mf, "blk.0.ffn_up.bias");
    m->lm_head_bias = gm_modelfile_has_tensor(mf, "output.bias");
    m->final_norm = gm_modelfile_has_tensor(mf, "output_norm.weight");
    m->qk_norm = gm_modelfile_has_tensor(mf, "blk.0.attn_q_norm.weight");
    if (gm_modelfile_has_tensor(mf, "position_embd.weight"))
        m->n_positions_learned = a->context_length;
    if (m->head == GM_HEAD_ENCODER) {
        m->pooler = false;
        m->emb_norm = gm_modelfile_has_tensor(mf, "token_embd_norm.weight");
    }
    return GM_OK;
}

/* Whether every stored dtype is a plain float type: then one stored element is one
 * parameter.  Packed integer storage (GPTQ/AWQ qweight in I32, bitsandbytes in U8) holds
 * several parameters per element, so its element count says nothing about completeness. */
static bool all_plain(const struct gm_modelfile *mf)
{
    for (size_t i = 0; i < mf->n_dtypes; i++)
        if (plain_dtype(mf->dtypes[i].name) == GM_DTYPE_UNKNOWN)
            return false;
    return true;
}

/* "the GGUF file holds" / "the safetensors files hold" */
static const char *files_hold(enum gm_modelfile_format f)
{
    return f == GM_MODELFILE_GGUF ? "the GGUF file holds" : "the safetensors files hold";
}

/* The weights must hold the model the architecture describes: a folder with one shard of
 * four, or one tensor beside a config.json, would otherwise be sized as a quarter of the
 * model or as 4 parameters.  Fewer than half the tensors the architecture has, or under 90%
 * of its parameters, is refused: real checkpoints match the architecture's count to within
 * a few percent (extra tensors, such as vision towers, only add).  The parameters are
 * m->n_params_file; they are compared only where they are parameters: GGUF shapes are
 * logical, plain float storage holds one per element, and a packed checkpoint whose
 * scheme is known is unpacked (unpacked_params()); packed storage of no known scheme says
 * nothing about completeness. */
static enum gm_status check_complete(const struct gm_modelfile *mf, const struct gm_model *m,
                                     struct gm_error *err)
{
    struct gm_param_counts pc;
    struct gm_error ignored;
    const char *what = m->model_type[0] ? m->model_type : gm_arch_name(m->arch);
    bool counted;

    if (m->arch == GM_ARCH_UNKNOWN || gm_model_count_params(m, &pc, &ignored) != GM_OK)
        return GM_OK; /* no architecture to hold the files against */
    if (mf->n_tensors * 2 < pc.n_tensors)
        return gm_fail(err, GM_ERR_FORMAT, GM_NO_OFFSET,
                       "%s %llu tensor%s, but a %s model of this configuration has %llu: "
                       "shards or tensors are missing (give every shard, or the config.json "
                       "alone to size the model from its architecture)",
                       files_hold(mf->format), (unsigned long long)mf->n_tensors,
                       mf->n_tensors == 1 ? "" : "s", what, (unsigned long long)pc.n_tensors);
    counted = mf->format == GM_MODELFILE_GGUF || all_plain(mf) || m->quant.method != GM_QUANT_NONE;
    if (counted && m->n_params_file < pc.total / 10 * 9)
        return gm_fail(err, GM_ERR_FORMAT, GM_NO_OFFSET,
                       "%s %llu parameters, but a %s model of this configuration has "
                       "%llu (%.1f%% of them present): shards or tensors are missing (give every "
                       "shard, or the config.json alone to size the model from its architecture)",
                       files_hold(mf->format), (unsigned long long)m->n_params_file, what,
                       (unsigned long long)pc.total,
                       100.0 * (double)m->n_params_file / (double)pc.total);
    return GM_OK;
}

/* Whether a GGUF stores any tensor in a quantised ggml type (the format then refuses full
 * training; its bytes are the headers'). */
static bool gguf_quantised(const struct gm_modelfile *mf)
{
    for (size_t i = 0; i < mf->n_dtypes; i++)
        if (plain_dtype(mf->dtypes[i].name) == GM_DTYPE_UNKNOWN && mf->dtypes[i].n_tensors &&
            mf->dtypes[i].name[0] != 'I')
            return true;
    return false;
}

enum gm_status gm_modelfile_to_model(const struct gm_modelfile *mf, struct gm_model *out,
                                     struct gm_error *err)
{
    enum gm_status st;
    int dom = gm_modelfile_dominant_dtype(mf);
    gm_model_init(out);
    if (mf->format == GM_MODELFILE_GGUF) {
        st = from_gguf(mf, out, err);
        if (st == GM_OK && gguf_quantised(mf))
            gm_quant_init(&out->quant, GM_QUANT_GGUF);
    } else if (mf->format == GM_MODELFILE_SAFETENSORS) {
        if (!mf->config_path[0]) {
            /* no config.json: the header still gives the exact weights, the tensors' shapes
             * a generic layout */
            generic_layout(mf, out);
            out->no_config = true;
            st = GM_OK;
        } else {
            st = gm_model_load_hf_config(mf->config_path, out, err);
        }
        if (out->no_config) {
            /* sized above */
        } else if (st == GM_ERR_FORMAT && out->incomplete) {
            /* the shapes give what the config left out (vocabulary, FFN width, hidden size,
             * layers); what they cannot give (the heads) stays an error */
            fill_from_shapes(mf, out);
            if (!out->head_dim && out->n_heads)
                out->head_dim = out->hidden / out->n_heads;
            if (!out->n_kv_heads)
                out->n_kv_heads = out->n_heads;
            out->incomplete = false;
            if ((st = gm_model_validate(out, err)) != GM_OK)
                gm_error_prefix(err, "%s", mf->config_path);
        } else if (st == GM_ERR_UNSUPPORTED && out->arch == GM_ARCH_UNKNOWN) {
            /* a config gpumem cannot read (its model_type is kept): the files size it */
            generic_layout(mf, out);
            st = GM_OK;
        } else if (st == GM_OK) {
            fill_from_shapes(mf, out);
        }
    } else {
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "no model file loaded");
    }
    if (st)
        return st;
    out->n_params_file = out->quant.method == GM_QUANT_NONE || out->quant.method == GM_QUANT_GGUF
                             ? mf->n_params
                             : unpacked_params(mf, &out->quant);
    st = check_complete(mf, out, err);
    if (st)
        return st;
    out->weight_bytes_file = mf->n_bytes;
    if (dom >= 0 && plain_dtype(mf->dtypes[dom].name) != GM_DTYPE_UNKNOWN &&
        (mf->format == GM_MODELFILE_GGUF || out->dtype == GM_DTYPE_UNKNOWN))
        out->dtype = plain_dtype(mf->dtypes[dom].name);
    return GM_OK;
}
