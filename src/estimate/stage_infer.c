/* SPDX-License-Identifier: MIT */
/* stage_infer.c - the inference stage: generation as transformers holds it: the KV cache,
 * prefill and decode activations and the sampled logits (the weights come from
 * stage_model.c).  Engines with their own memory manager (vLLM, llama.cpp) account for
 * everything but the weights themselves (stage_engine.c).
 *
 * KV cache = 2 (K and V) x layers x num_key_value_heads x head_dim x tokens x bytes x
 * sequences, with tokens = context + new tokens, capped at the sliding window for the
 * layers that use one.  Prefill runs without autograd, so activations are the transient
 * peak of one layer (the residual and norm output, then the larger of attention - q, k,
 * v, output, and for eager attention the fp32 scores - and the MLP's three I-wide
 * tensors), plus the logits of the positions that are sampled. */
#include "estimate/estimate_int.h"

#include <math.h>
#include <stdio.h>

static double kv_tokens_bytes(const struct gm_model *m, uint64_t tokens, double bytes,
                              uint64_t seqs, uint64_t *capped_layers)
{
    double per_tok_layer = 2.0 * (double)m->n_kv_heads * (double)m->head_dim * bytes;
    uint64_t full_layers = m->n_layers - m->n_sliding_layers;
    uint64_t win = tokens;
    *capped_layers = 0;
    if (m->sliding_window && m->n_sliding_layers && tokens > m->sliding_window) {
        win = m->sliding_window;
        *capped_layers = m->n_sliding_layers;
    } else {
        full_layers = m->n_layers;
    }
    return per_tok_layer * (double)seqs *
           ((double)full_layers * (double)tokens +
            (double)(m->n_layers - full_layers) * (double)win);
}

static double prefill_layer_peak(const struct gm_model *m, double ea, bool eager, uint64_t seqs,
                                 uint64_t tokens)
{
    double T = (double)seqs * (double)tokens;
    double h = (double)m->hidden;
    double q = (double)m->n_heads * (double)m->head_dim;
    double kv = (double)m->n_kv_heads * (double)m->head_dim;
    double I = (double)m->intermediate;
    double attn = T * ea * (2.0 * q + 2.0 * kv);
    /* MoE layers run one expert at a time over its routed tokens: at most T tokens wide. */
    double mlp = T * ea * (m->gated_mlp ? 3.0 : 2.0) * I;
    if (eager)
        attn += (double)seqs * (double)m->n_heads * (double)tokens * (double)tokens * (4.0 + ea);
    return T * ea * 2.0 * h + (attn > mlp ? attn : mlp);
}

enum gm_status est_stage_infer(struct est_ctx *cx, struct gm_error *err)
{
    const struct gm_job *j = cx->job;
    const struct gm_model *m = cx->m;
    struct gm_estimate *e = cx->e;
    const struct gm_job_workload *w = &j->workload;
    double ea = cx->stored_bits >= 32 ? 4.0 : 2.0;
    double kvb = j->numerics.kv_dtype != GM_DTYPE_UNKNOWN
                     ? (double)gm_dtype_bits(j->numerics.kv_dtype) / 8.0
                     : ea;
    uint64_t tokens, context;
    bool eager = j->memory.attention == GM_ATTN_EAGER;
    char note[GM_EST_NOTE_MAX];
    double kv, pre, logits, dec;
    uint64_t capped = 0;
    enum gm_status st;

    if (j->mode != GM_EST_INFER)
        return GM_OK;
    context = w->context;
    tokens = context + w->new_tokens;
    if (!m)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "inference estimate needs a model for the KV cache (give MODEL)");
    if (m->head != GM_HEAD_CAUSAL_LM)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "model '%s' is an encoder: it has no KV cache to generate with",
                       m->name[0] ? m->name : m->model_type);
    if (m->max_positions && tokens > m->max_positions)
        est_assume(e,
                   "context + new tokens = %llu exceed the model's max_position_embeddings "
                   "%llu",
                   (unsigned long long)tokens, (unsigned long long)m->max_positions);
    if (est_allocator(j) != EST_ALLOC_TORCH)
        return GM_OK; /* an engine with its own memory manager accounts for itself */
    /* a context not given: the range spans half to twice the default */
    context = est_round(est_length_factor(cx, "context") * (double)w->context);
    tokens = context + w->new_tokens;

    kv = kv_tokens_bytes(m, tokens, kvb, w->batch, &capped);
    snprintf(note, sizeof(note),
             "2 x %llu layers x %llu KV heads x %llu head_dim x %llu "
             "tokens x %g B x %llu seqs%s",
             (unsigned long long)m->n_layers, (unsigned long long)m->n_kv_heads,
             (unsigned long long)m->head_dim, (unsigned long long)tokens, kvb,
             (unsigned long long)w->batch, capped ? " (window-capped layers)" : "");
    st = est_add(e, GM_KIND_KV_CACHE, "kv_cache", est_round(kv), GM_EST_PHASE_INFER_ALL, false,
                 GM_EXTENT_ALL_LAYERS, note, err);
    if (st != GM_OK)
        return st;

    pre = context ? prefill_layer_peak(m, ea, eager, w->batch, context) : 0;
    st = est_add(e, GM_KIND_ACTIVATIONS, "prefill_activations", est_round(pre),
                 GM_EST_PHASE_PREFILL, true, GM_EXTENT_ONE_LAYER,
                 "transient peak of one layer over the whole prompt", err);
    if (st != GM_OK)
        return st;
    logits = (double)w->batch * (w->full_logits ? (double)(context ? context : 1) : 1.0) *
             (double)m->vocab * (ea + 4.0);
    st = est_add(e, GM_KIND_LOGITS, "logits", est_round(logits), GM_EST_PHASE_PREFILL, true,
                 GM_EXTENT_HEAD,
                 w->full_logits ? "every prompt position, compute dtype + fp32"
                                : "last position per sequence, compute dtype "
                                  "+ fp32",
                 err);
    if (st != GM_OK)
        return st;
    dec = prefill_layer_peak(m, ea, false, w->batch, 1) +
          (double)w->batch * (double)m->vocab * (ea + 4.0);
    st = est_add(e, GM_KIND_ACTIVATIONS, "decode_activations", est_round(dec), GM_EST_PHASE_DECODE,
                 true, GM_EXTENT_ONE_LAYER, "one token per sequence: one layer + logits", err);
    if (st != GM_OK)
        return st;

    est_assume(e,
               "KV cache: num_key_value_heads=%llu (not the %llu query heads), "
               "head_dim=%llu, %g bytes per element, preallocated for context + "
               "new tokens = %llu",
               (unsigned long long)m->n_kv_heads, (unsigned long long)m->n_heads,
               (unsigned long long)m->head_dim, kvb, (unsigned long long)tokens);
    if (capped)
        est_assume(e,
                   "%llu of %llu layers keep only the last %llu tokens (sliding "
                   "window; an engine that keeps every token needs more)",
                   (unsigned long long)capped, (unsigned long long)m->n_layers,
                   (unsigned long long)m->sliding_window);
    est_assume(e, "prefill of the whole prompt in one pass (no chunking), %s attention",
               eager ? "eager (fp32 scores materialised)" : "sdpa/flash");
    est_assume(e, "no engine pool: serving engines (vLLM, TGI) reserve a fraction of "
                  "the GPU for KV blocks up front");
    return GM_OK;
}
