/* SPDX-License-Identifier: MIT */
/* serving.c - serving engines: how vLLM sizes its KV pool, and what llama.cpp allocates.
 *
 * vLLM (vllm-project/vllm, determine_available_memory / determine_num_available_blocks;
 * PR #10511's start-up log breaks memory into the same parts):
 *   budget        = total GPU memory x gpu_memory_utilization
 *   non_kv        = weights + activation peak of the profile run + non-torch memory
 *   KV pool       = budget - non_kv, cut to whole blocks of
 *                   2 x block_size x kv_heads/tp x head_dim x dtype bytes x layers
 *   tokens        = blocks x block_size; concurrency at max_model_len = tokens / max_model_len
 * The profile run pushes max_num_batched_tokens tokens through the model once; its peak is
 * modelled per layer as the MLP intermediates (gate+up output, activation output), the
 * q/k/v output and two hidden-sized tensors, plus the sampler's fp32 logits and
 * probabilities for max_num_seqs sequences.  CUDA graphs are captured after the pool is
 * allocated, outside the budget.  The CUDA context is outside the budget too (vLLM
 * measures its baseline after creating it).
 *
 * llama.cpp (ggml-org/llama.cpp, llama_context / llama_kv_cache): all layers offloaded
 * (-ngl 999) except token_embd, which stays in host memory; KV cache = 2 x layers x
 * kv_heads x head_dim x n_ctx at the cache type's ggml size (f16 2 B, q8_0 34 B per 32,
 * q4_0 18 B per 32); the compute buffer (ggml graph allocator, peak of one micro-batch of
 * n_ubatch tokens) is modelled as max(f32 attention scores n_ubatch x n_ctx x heads without
 * flash attention, f32 logits n_ubatch x vocab) + the f32 MLP intermediates and hidden
 * states of one micro-batch.  The compute-buffer formula is an approximation (not taken
 * from a checked source); KV and weights are exact. */
#include "estimate/ext_int.h"

#include "gpumem/modelfile.h"

#include <stdio.h>
#include <string.h>

/* The engine's accounting replaces the generic inference estimate, assumptions included. */
static void clear_components(struct gm_estimate *e)
{
    e->n_components = 0;
    e->n_assumptions = 0;
}

static unsigned kv_elem_bytes_x100(enum gm_dtype t)
{
    unsigned bits = gm_dtype_bits(t);
    return bits ? bits * 100 / 8 : 200;
}

static uint64_t weight_bytes(const struct gm_estimate_inputs *in, uint64_t n)
{
    const struct gm_model *m = in->model;
    double bits = in->weight_bits;
    if (m && m->weight_bytes_file && bits <= 0)
        return m->weight_bytes_file;
    if (bits <= 0)
        bits = m && m->dtype != GM_DTYPE_UNKNOWN ? (double)gm_dtype_bits(m->dtype) : 16.0;
    return (uint64_t)((double)n * bits / 8.0 + 0.5);
}

enum gm_status ext_apply_vllm(struct gm_estimate_inputs *in, const struct gm_estimate_ext *x,
                              const struct gm_param_counts *pc, struct gm_estimate *e,
                              struct gm_estimate_ext_result *res, struct gm_error *err)
{
    const struct gm_model *m = in->model;
    uint64_t t = x->tp ? x->tp : 1, n = in->n_params ? in->n_params : pc->total, w, act, sampler,
             budget, non_torch, block, per_token, T, kv_heads, q, need, pool;
    unsigned kvb100;
    enum gm_dtype kvt;
    char note[GM_EST_NOTE_MAX];
    enum gm_status st;

    if (!m)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "--engine vllm needs a model (its KV layout sizes the pool)");
    if (!in->gpu_memory_bytes)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "--engine vllm sizes its KV pool from the GPU's memory: give --gpu or "
                       "--gpu-memory");
    if (x->gpu_memory_utilization <= 0 || x->gpu_memory_utilization > 1)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "--gpu-memory-utilization must be in (0, 1]");
    if (m->n_kv_heads % t != 0 && t % m->n_kv_heads != 0)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "--tp %llu does not divide %llu KV heads",
                       (unsigned long long)t, (unsigned long long)m->n_kv_heads);
    clear_components(e);
    kvt = in->kv_dtype != GM_DTYPE_UNKNOWN
              ? in->kv_dtype
              : (m->dtype == GM_DTYPE_F32 ? GM_DTYPE_F32 : GM_DTYPE_BF16);
    kvb100 = kv_elem_bytes_x100(kvt);
    /* vLLM replicates KV heads when tp exceeds them */
    kv_heads = m->n_kv_heads >= t ? m->n_kv_heads / t : 1;
    per_token = 2 * m->n_layers * kv_heads * m->head_dim * kvb100 / 100;
    block = per_token * (x->block_size ? x->block_size : 16);
    w = weight_bytes(in, n) / t;
    T = x->max_num_batched_tokens ? x->max_num_batched_tokens : 8192;
    q = m->n_heads * m->head_dim;
    {
        uint64_t ffn = m->intermediate * (m->n_experts_active ? m->n_experts_active : 1);
        uint64_t per_tok =
            (ffn * (m->gated_mlp ? 3 : 2) + q + 2 * m->n_kv_heads * m->head_dim) / t +
            2 * m->hidden;
        act = gm_mul_sat(gm_mul_sat(T, per_tok), 2);
    }
    sampler = gm_mul_sat(gm_mul_sat(x->max_num_seqs ? x->max_num_seqs : 256, m->vocab), 4 * 2);
    non_torch =
        x->non_torch_bytes ? x->non_torch_bytes : (t > 1 ? (uint64_t)2 << 30 : (uint64_t)256 << 20);
    budget = (uint64_t)((double)in->gpu_memory_bytes * x->gpu_memory_utilization);
    res->budget_bytes = budget;
    res->non_torch_bytes = non_torch;
    res->activation_peak_bytes = gm_add_sat(act, sampler);
    res->kv_bytes_per_token = per_token;
    need = gm_add_sat(gm_add_sat(w, act), gm_add_sat(sampler, non_torch));
    pool = budget > need ? budget - need : 0;
    res->kv_blocks = block ? pool / block : 0;
    res->kv_pool_bytes = res->kv_blocks * block;
    res->kv_tokens = res->kv_blocks * (x->block_size ? x->block_size : 16);
    res->max_model_len = x->max_model_len   ? x->max_model_len
                         : m->max_positions ? m->max_positions
                                            : in->context + in->new_tokens;
    res->max_concurrency =
        res->max_model_len ? (double)res->kv_tokens / (double)res->max_model_len : 0.0;

    snprintf(note, sizeof note, "%llu parameters%s, divided over tp = %llu", (unsigned long long)n,
             m->weight_bytes_file ? " as stored in the model files" : "", (unsigned long long)t);
    if ((st = gm_estimate_add_component(e, "weights", w, GM_EST_PHASE_INFER_ALL, false, note, err)))
        return st;
    snprintf(note, sizeof note, "profile run: %llu batched tokens through one layer, 16-bit",
             (unsigned long long)T);
    if ((st = gm_estimate_add_component(e, "activations", act, GM_EST_PHASE_PREFILL, true, note,
                                        err)))
        return st;
    snprintf(note, sizeof note, "sampler: fp32 logits and probabilities of %llu sequences",
             (unsigned long long)(x->max_num_seqs ? x->max_num_seqs : 256));
    if ((st = gm_estimate_add_component(e, "logits", sampler, GM_EST_PHASE_PREFILL, true, note,
                                        err)))
        return st;
    snprintf(note, sizeof note, "%llu blocks of %llu tokens (%llu B per token, %s)",
             (unsigned long long)res->kv_blocks,
             (unsigned long long)(x->block_size ? x->block_size : 16),
             (unsigned long long)per_token, gm_dtype_name(kvt));
    if ((st = gm_estimate_add_component(e, "kv_cache", res->kv_pool_bytes, GM_EST_PHASE_INFER_ALL,
                                        false, note, err)))
        return st;
    if (!x->enforce_eager && (st = gm_estimate_add_component(
                                  e, "cuda_graphs", x->cuda_graph_bytes, GM_EST_PHASE_DECODE, false,
                                  "CUDA-graph pool captured after the KV pool "
                                  "(outside gpu_memory_utilization)",
                                  err)))
        return st;
    gm_estimate_assume(e,
                       "KV cache: num_key_value_heads=%llu (%llu per GPU), head_dim=%llu, %s; "
                       "sliding windows not modelled (full-length blocks)",
                       (unsigned long long)m->n_kv_heads, (unsigned long long)kv_heads,
                       (unsigned long long)m->head_dim, gm_dtype_name(kvt));
    /* vLLM preallocates: no fragmentation margin; non-torch memory sits outside torch. */
    in->fragmentation = 0;
    in->workspace_bytes = non_torch;
    gm_estimate_assume(e,
                       "vLLM: budget %.2f x total; non-torch memory %llu MiB (%s); "
                       "max_num_batched_tokens %llu, max_num_seqs %llu",
                       x->gpu_memory_utilization, (unsigned long long)(non_torch >> 20),
                       x->non_torch_bytes ? "given" : (t > 1 ? "NCCL at tp >= 2" : "default"),
                       (unsigned long long)T,
                       (unsigned long long)(x->max_num_seqs ? x->max_num_seqs : 256));
    if (res->kv_tokens < res->max_model_len)
        gm_estimate_assume(e,
                           "vLLM would refuse to start: the KV pool holds %llu tokens, less "
                           "than max_model_len %llu",
                           (unsigned long long)res->kv_tokens,
                           (unsigned long long)res->max_model_len);
    return GM_OK;
}

enum gm_status gm_llamacpp_kv_bytes(const struct gm_model *m, uint32_t ggml_type, uint64_t tokens,
                                    uint64_t *bytes, struct gm_error *err)
{
    uint64_t row = m->n_kv_heads * m->head_dim, row_bytes;
    if (!gm_ggml_type_bytes(ggml_type, row, &row_bytes, NULL))
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "KV cache type %u cannot hold rows of %llu elements", ggml_type,
                       (unsigned long long)row);
    *bytes = gm_mul_sat(gm_mul_sat(gm_mul_sat(2, m->n_layers), row_bytes), tokens);
    return GM_OK;
}

enum gm_status ext_apply_llamacpp(struct gm_estimate_inputs *in, const struct gm_estimate_ext *x,
                                  const struct gm_param_counts *pc, struct gm_estimate *e,
                                  struct gm_estimate_ext_result *res, struct gm_error *err)
{
    const struct gm_model *m = in->model;
    uint64_t n = in->n_params ? in->n_params : pc->total, w, embd, kv, ctx, ub, scores, logits, mlp,
             compute, batch = in->batch ? in->batch : 1;
    const char *kvname = "f16";
    char note[GM_EST_NOTE_MAX];
    enum gm_status st;

    if (!m)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "--engine llama.cpp needs a model (a GGUF file, config or catalog name)");
    clear_components(e);
    w = x->gguf_weight_bytes ? x->gguf_weight_bytes : weight_bytes(in, n);
    embd = x->gguf_input_bytes ? x->gguf_input_bytes
                               : gm_mul_div_u64(gm_mul_sat(m->vocab, m->hidden), w, n ? n : 1);
    if (embd > w)
        embd = w;
    ctx = gm_mul_sat(gm_add_sat(in->context, in->new_tokens), batch);
    if ((st = gm_llamacpp_kv_bytes(m, x->kv_ggml_type, ctx, &kv, err)))
        return st;
    (void)gm_ggml_type_bytes(x->kv_ggml_type, 0, &(uint64_t){0}, &kvname);
    ub = x->n_ubatch ? x->n_ubatch : 512;
    if (ub > ctx)
        ub = ctx;
    /* the cache is padded to 256 cells */
    scores = x->flash_attn
                 ? 0
                 : gm_mul_sat(gm_mul_sat(ub, (ctx + 255) / 256 * 256), gm_mul_sat(m->n_heads, 4));
    logits = gm_mul_sat(gm_mul_sat(ub, m->vocab), 4);
    mlp = gm_mul_sat(gm_mul_sat(ub, gm_add_sat(gm_mul_sat(m->intermediate, 2), 3 * m->hidden)), 4);
    compute = gm_add_sat(scores > logits ? scores : logits, mlp);
    res->compute_buffer_bytes = compute;
    res->kv_bytes_per_token = ctx ? kv / ctx : 0;

    if (x->gguf_weight_bytes)
        gm_estimate_assume(e, "weights: the GGUF tensors as stored (%llu bytes, ggml block sizes)",
                           (unsigned long long)w);
    else
        gm_estimate_assume(e, "weights: %llu parameters at %g bits (no GGUF file given)",
                           (unsigned long long)n, in->weight_bits > 0 ? in->weight_bits : 16.0);
    snprintf(note, sizeof note,
             "GGUF tensors on the GPU (%llu B of token_embd stay in host memory)",
             (unsigned long long)embd);
    if ((st = gm_estimate_add_component(e, "weights", w - embd, GM_EST_PHASE_INFER_ALL, false, note,
                                        err)))
        return st;
    snprintf(note, sizeof note, "n_ctx %llu cells at %s", (unsigned long long)ctx, kvname);
    if ((st = gm_estimate_add_component(e, "kv_cache", kv, GM_EST_PHASE_INFER_ALL, false, note,
                                        err)))
        return st;
    snprintf(note, sizeof note, "ggml graph of one %llu-token micro-batch%s",
             (unsigned long long)ub, x->flash_attn ? " (flash attention)" : "");
    if ((st = gm_estimate_add_component(e, "compute_buffer", compute, GM_EST_PHASE_INFER_ALL, false,
                                        note, err)))
        return st;
    /* ggml allocates exact buffers: no caching-allocator margin, no cuBLAS workspace
     * beyond the context. */
    gm_estimate_assume(e, "llama.cpp does not use PyTorch: \"allocated\" and \"reserved\" are "
                          "its ggml buffers (weights, KV cache, compute buffer)");
    in->fragmentation = 0;
    in->workspace_bytes = 0;
    gm_estimate_assume(e,
                       "llama.cpp: every layer offloaded (-ngl 999), n_ctx = %llu tokens "
                       "(%llu sequences x %llu), KV type %s, n_ubatch %llu; the compute-buffer "
                       "size is an approximation",
                       (unsigned long long)ctx, (unsigned long long)batch,
                       (unsigned long long)(in->context + in->new_tokens), kvname,
                       (unsigned long long)ub);
    return GM_OK;
}
