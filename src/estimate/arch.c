/* SPDX-License-Identifier: MIT */
/* arch.c - what the stages need to know about a model's layers, written once: the widths
 * a layer computes per token (query, keys, values, MLP) averaged over its layers, and how
 * each engine lays out the KV cache of one attention layer.
 *
 * Widths: the MLP width run per token is the dense width in the dense layers and, in the
 * layers with routed experts, the top-k experts' width plus the shared experts'; averaged
 * over the layers it is exact for every term that is linear in the width.  MLA attention
 * (DeepSeek-V2/V3) computes per-head keys of qk_nope + qk_rope and values of v_head_dim
 * from its latent, plus the low-rank intermediates (q_lora_rank, kv_lora_rank + rope).
 *
 * Shapes the parallel layouts need: whether tensor parallelism splits the heads, the largest
 * linear inside a layer, the parameters of one layer (what FSDP wraps).
 *
 * KV layouts of one attention layer, per token (elements; keys and values):
 *   transformers  K and V per KV head as the attention computes them; MLA caches the
 *                 decompressed per-head keys (qk_nope + qk_rope) and values (v_head_dim)
 *                 (modeling_deepseek_v3.py: past_key_values.update(key_states, value_states))
 *   vLLM          GQA: max(1, kv_heads / tp) heads per GPU (ModelConfig.get_num_kv_heads);
 *                 MLA: one latent of kv_lora_rank + qk_rope_head_dim, no factor 2 and not
 *                 divided by tp (MLAAttentionSpec: "during decode it becomes MQA")
 *   llama.cpp     GQA: every KV head; MLA (deepseek2 since PR 12801): the latent once, the
 *                 V cache a view of the K cache
 * The encoder of an encoder-decoder keeps no cache; its decoder caches its own tokens
 * (self-attention) and, per layer, the keys and values of the encoder's output
 * (cross-attention, computed once).  Encoders keep none. */
#include "estimate/estimate_int.h"

uint64_t est_total_layers(const struct gm_model *m)
{
    return m->head == GM_HEAD_SEQ2SEQ_LM ? m->n_layers + m->n_decoder_layers : m->n_layers;
}

uint64_t est_kv_layers(const struct gm_model *m)
{
    switch (m->head) {
    case GM_HEAD_ENCODER:
        return 0;
    case GM_HEAD_SEQ2SEQ_LM:
        return m->n_decoder_layers;
    default: /* linear-attention layers keep a recurrent state instead */
        return gm_model_attention_layers(m);
    }
}

const char *est_linear_kind(const struct gm_model *m)
{
    if (m->mamba_heads)
        return "Mamba-2";
    return m->mamba_d_inner ? "Mamba" : "Gated DeltaNet";
}

uint64_t est_moe_layers(const struct gm_model *m)
{
    if (!m->n_experts)
        return 0;
    return m->n_dense_layers < m->n_layers ? m->n_layers - m->n_dense_layers : 0;
}

void est_geom(const struct gm_model *m, struct est_geom *g)
{
    double heads = (double)m->n_heads, vd = (double)(m->head_dim_v ? m->head_dim_v : m->head_dim);
    double L = (double)(m->n_layers ? m->n_layers : 1);
    double dense = m->n_experts ? (double)m->n_dense_layers : L, moe = L - dense;
    double Ie = (double)(m->moe_intermediate ? m->moe_intermediate : m->intermediate);
    double routed = (double)m->n_experts_active * Ie + (double)m->n_shared_experts * Ie +
                    (double)m->shared_intermediate;
    g->q = heads * (double)m->head_dim;
    g->o_in = heads * vd;
    if (m->kv_lora_rank) {
        g->k = heads * (double)m->head_dim;
        g->v = heads * vd;
        g->latent = (double)(m->q_lora_rank + m->kv_lora_rank + m->qk_rope_head_dim);
    } else {
        g->k = (double)m->n_kv_heads * (double)m->head_dim;
        g->v = (double)m->n_kv_heads * vd;
        g->latent = 0;
    }
    g->mlp = (dense * (double)m->intermediate + moe * routed) / L;
    /* the widest single MLP: a dense layer's, one routed expert's or the shared expert's */
    g->mlp_widest = dense > 0 ? (double)m->intermediate : 0;
    if (m->n_experts && Ie > g->mlp_widest)
        g->mlp_widest = Ie;
    if ((double)m->shared_intermediate + (double)m->n_shared_experts * Ie > g->mlp_widest)
        g->mlp_widest = (double)m->shared_intermediate + (double)m->n_shared_experts * Ie;
    g->mlp_max = dense > 0 ? (double)m->intermediate : 0;
    if (moe > 0 && routed > g->mlp_max)
        g->mlp_max = routed;
    g->moe_share = m->n_experts ? moe / L : 0;
}

void est_kv_rows(const struct gm_model *m, enum est_kv_store who, uint64_t tp, uint64_t *k,
                 uint64_t *v)
{
    uint64_t vd = m->head_dim_v ? m->head_dim_v : m->head_dim, heads = m->n_kv_heads;
    if (m->kv_lora_rank && who != EST_KV_TRANSFORMERS) {
        *k = m->kv_lora_rank + m->qk_rope_head_dim;
        *v = 0;
        return;
    }
    if (m->kv_lora_rank)
        heads = m->n_heads;
    else if (who == EST_KV_VLLM && tp > 1)
        heads = heads >= tp ? heads / tp : 1;
    *k = heads * m->head_dim;
    *v = heads * vd;
}

double est_kv_elems(const struct gm_model *m, enum est_kv_store who, uint64_t tp)
{
    uint64_t k, v;
    est_kv_rows(m, who, tp, &k, &v);
    return (double)k + (double)v;
}

uint64_t est_vllm_indexer_bytes(const struct gm_model *m)
{
    /* vllm/model_executor/models/deepseek_v2.py: DeepseekV32IndexerCache caches one key per
     * token and layer as fp8 values with an fp32 scale per 128 (head_dim + head_dim / 128 x
     * 4 bytes, uint8, an MLAAttentionSpec of one head: on every GPU whatever the tp, at any
     * --kv-cache-dtype) */
    uint64_t d = m->index_n_heads ? m->index_head_dim : 0;
    return d + d / 128 * 4;
}

uint64_t est_vllm_state_bytes(const struct gm_model *m, uint64_t tp, uint64_t pp)
{
    /* vLLM's MambaSpec (mamba_utils.py): a Gated DeltaNet layer's conv state (2 key_dim +
     * value_dim) / tp x (kernel - 1) and recurrent state value_heads / tp x key dim x value
     * dim; a Mamba layer's d_inner / tp x (d_conv - 1) and d_inner / tp x d_state; in the
     * model dtype (16-bit unless --mamba-ssm-cache-dtype says otherwise), one per request and
     * layer.  Mamba-2 (mamba2_state_shape): groups that tp does not divide are repeated up to
     * tp (extra_groups_for_head_shards), so each GPU holds whole groups of B and C. */
    uint64_t rec, conv, t = tp ? tp : 1;
    struct gm_model g = *m;
    if (g.mamba_heads && g.mamba_groups % t)
        g.mamba_groups = t;
    gm_model_linear_state(&g, true, &rec, &conv);
    return est_div_up(m->n_linear_layers, pp ? pp : 1) * (rec / t + conv / t) * 2;
}

static uint64_t est_vllm_state_per_token(const struct gm_model *m, uint64_t tp, uint64_t pp,
                                         uint64_t len)
{
    uint64_t b = est_vllm_state_bytes(m, tp, pp);
    return b && len ? est_div_up(b, len) : 0;
}

uint64_t est_kv_sliding_layers(const struct gm_model *m)
{
    uint64_t all = est_kv_layers(m);
    if (!m->sliding_window)
        return 0;
    return m->n_sliding_layers < all ? m->n_sliding_layers : all;
}

uint64_t est_vllm_kv_per_token(const struct gm_model *m, uint64_t tp, uint64_t pp, unsigned kvb100,
                               uint64_t len, uint64_t chunk, uint64_t block)
{
    uint64_t k, v, all = est_kv_layers(m), layers = est_div_up(all, pp ? pp : 1),
                   sliding = est_kv_sliding_layers(m), full, held, per_layer;
    est_kv_rows(m, EST_KV_VLLM, tp, &k, &v);
    if (!sliding || !len || !block)
        return layers * (k + v) * kvb100 / 100 + layers * est_vllm_indexer_bytes(m) +
               est_vllm_state_per_token(m, tp, pp, len);
    /* the stage with the most layers, holding its share of the full-attention ones */
    full = est_div_up(all - sliding, pp ? pp : 1);
    if (full > layers)
        full = layers;
    sliding = layers - full;
    per_layer = (k + v) * kvb100; /* hundredths of a byte per token */
    /* vllm/v1/kv_cache_interface.py: SlidingWindowSpec holds window - 1 + the batched
     * tokens, one block more; ChunkedLocalAttentionSpec (Llama-4) chunk + batched tokens */
    held = m->chunked_attention ? m->sliding_window + chunk : m->sliding_window - 1 + chunk;
    held = (est_div_up(held < len ? held : len, block) + (m->chunked_attention ? 0 : 1)) * block;
    if (held > est_div_up(len, block) * block)
        held = est_div_up(len, block) * block;
    return (full * per_layer * est_div_up(len, block) * block + sliding * per_layer * held) / 100 /
               len +
           est_vllm_state_per_token(m, tp, pp, len);
}

bool est_tp_divides(const struct gm_model *m, uint64_t t)
{
    if (t <= 1 || !m->n_heads || !m->n_kv_heads)
        return true;
    return m->n_heads % t == 0 && (m->n_kv_heads % t == 0 || t % m->n_kv_heads == 0);
}

uint64_t est_largest_linear(const struct gm_model *m)
{
    struct est_geom g;
    uint64_t q, f;
    est_geom(m, &g); /* the widest MLP: dense, one expert or the shared one (arch.c) */
    q = m->hidden * m->n_heads * m->head_dim;
    f = (uint64_t)((double)m->hidden * g.mlp_widest);
    return q > f ? q : f;
}

uint64_t est_layer_params(const struct gm_model *m, const struct gm_param_counts *pc)
{
    uint64_t layers = est_total_layers(m);
    if (!layers)
        return pc->largest_tensor;
    return (pc->attention + pc->mlp + pc->norms) / layers;
}
