/* SPDX-License-Identifier: MIT */
/* stage_infer.c - the inference stage: generation as transformers holds it: the KV cache,
 * prefill and decode activations and the sampled logits (the weights come from
 * stage_model.c).  Engines with their own memory manager (vLLM, llama.cpp) account for
 * everything but the weights themselves (stage_engine.c).
 *
 * KV cache = KV layers x (K + V elements per token, arch.c) x tokens x bytes x sequences,
 * with tokens = context + new tokens, capped at the sliding window for the layers that use
 * one.  For GQA the K + V elements are 2 x num_key_value_heads x head_dim; for MLA
 * transformers keeps the decompressed per-head keys and values (heads x (qk_nope + qk_rope
 * + v_head_dim)).  Prefill runs without autograd, so activations are the transient peak of
 * one layer (the residual and norm output, then the larger of attention - q, k, v, output,
 * and for eager attention the fp32 scores - and the MLP's three I-wide tensors), plus the
 * logits of the positions that are sampled.
 *
 * Encoders (BERT family) do one forward pass over the context: no cache, no decode; what
 * stays is the last hidden state (and the pooled output or the classifier's logits).  An
 * encoder-decoder (T5, BART) runs its encoder over the context once, keeps the encoder's
 * output and, in every decoder layer, the keys and values of it (cross-attention), then
 * generates: its self-attention cache holds the generated tokens. */
#include "estimate/estimate_int.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* How transformers' generate() holds the cache and the prefill's logits, by release (with
 * --transformers-version; without it the allocation of the current release's static
 * accounting: a cache of context + new tokens, the last position's logits):
 *   before 4.36  the legacy tuple cache: every layer's forward builds its next key/value by
 *                torch.cat of the past tensors and the new ones, and the previous step's
 *                tuple stays referenced by generate's model_kwargs until the forward returns
 *                (modeling_llama.py at 4.35: key_states = torch.cat([past_key_value[0],
 *                key_states], dim=2)): at the end of a step two caches are alive; the
 *                prefill returns the logits of every position, upcast to fp32 in the model
 *   4.36 to 4.44 the Cache classes (PR #26681, cache_utils.py DynamicCache.update): each
 *                layer's tensors are replaced by torch.cat one layer at a time; the prefill
 *                still computes the logits of every position (logits = logits.float())
 *   from 4.45    generate passes num_logits_to_keep (logits_to_keep from 4.49): the prefill
 *                projects only the last position
 * A static cache (--static-cache: StaticCache, and SlidingWindowCache for the window layers)
 * is preallocated for the whole length and written in place: no concatenation. */
enum hf_generate { GEN_NONE = 0, GEN_LEGACY, GEN_CACHE_ALL_LOGITS, GEN_CACHE };

static enum hf_generate hf_generate_form(uint32_t v)
{
    if (!v)
        return GEN_NONE;
    if (v < GM_VERSION(4, 36, 0))
        return GEN_LEGACY;
    return v < GM_VERSION(4, 45, 0) ? GEN_CACHE_ALL_LOGITS : GEN_CACHE;
}

/* What generate()'s default cache keeps in a model's sliding-window (and chunked) layers, by
 * release (with --transformers-version; without it the current release's):
 *   from 4.56    DynamicCache(config=...) gives each sliding layer a DynamicSlidingWindowLayer
 *                that keeps at most the window (PR #40039, "New DynamicSlidingWindowLayer &
 *                associated Cache"; cache_utils.py DynamicCache.__init__, read at 004999d), and
 *                generate() ignores a checkpoint's cache_implementation="hybrid" (PR #40135);
 *                only the plain default cache (greedy or sampling): assisted generation,
 *                contrastive search and cache_implementation="dynamic_full" build their
 *                DynamicCache without the config (generation/utils.py dynamic_cache_kwargs =
 *                {}) and keep every token, which this model does not tell apart
 *   4.36 to 4.55 a plain DynamicCache: every layer keeps every token (DynamicCache.update
 *                concatenates; MistralFlashAttention2 slices the past to the window only in a
 *                local copy, never in the cache), unless the architecture's checkpoints
 *                default to cache_implementation="hybrid": then HybridCache (HybridChunkedCache
 *                for Llama-4), preallocated for context + new tokens with the sliding layers at
 *                the window, written in place
 *   before 4.36  the legacy tuple cache, modelled as keeping every token; not read at the
 *                v4.34/v4.35 tags: derived copies of that era's MistralFlashAttention2 (the
 *                padding_mask signature) return the window-sliced past concatenated with the
 *                new token as the layer's cache, so with flash attention a decode that runs past
 *                the window may keep only the window after the first step (the prefill still
 *                returns the whole context)
 * A static cache (--static-cache) keeps the window at every release. */
#define HF_DYNAMIC_SLIDING_WINDOW GM_VERSION(4, 56, 0)
enum hf_window_cache { HF_WINDOW_KEPT = 0, HF_WINDOW_EVERY_TOKEN, HF_WINDOW_HYBRID_STATIC };

/* The architectures whose default generation config names the hybrid cache: Gemma2Config
 * (cache_implementation="hybrid"), Gemma-3's checkpoints' generation_config.json, Llama-4's
 * HybridChunkedCache. */
static const enum gm_arch hf_hybrid_default[] = {GM_ARCH_GEMMA2, GM_ARCH_GEMMA3, GM_ARCH_LLAMA4};

static enum hf_window_cache hf_window_cache(const struct gm_job *j, const struct gm_model *m,
                                            enum hf_generate gen)
{
    uint32_t v = j->stack.transformers;
    if (!v || v >= HF_DYNAMIC_SLIDING_WINDOW || j->workload.static_cache ||
        !est_kv_sliding_layers(m))
        return HF_WINDOW_KEPT;
    for (size_t i = 0; i < sizeof hf_hybrid_default / sizeof hf_hybrid_default[0]; i++)
        if (hf_hybrid_default[i] == m->arch && gen != GEN_LEGACY)
            return HF_WINDOW_HYBRID_STATIC;
    return HF_WINDOW_EVERY_TOKEN;
}

/* Cache bytes of the model's attention layers over 'tokens' tokens of 'seqs' sequences; the
 * sliding layers among them keep at most the window when 'window' is set. */
static double kv_tokens_bytes(const struct gm_model *m, uint64_t tokens, double bytes,
                              uint64_t seqs, bool window, uint64_t *capped_layers)
{
    double per_tok_layer = est_kv_elems(m, EST_KV_TRANSFORMERS, 1) * bytes;
    uint64_t layers = est_kv_layers(m), sliding = est_kv_sliding_layers(m);
    uint64_t win = tokens;
    *capped_layers = 0;
    if (window && sliding && tokens > m->sliding_window) {
        win = m->sliding_window;
        *capped_layers = sliding;
    } else {
        sliding = 0;
    }
    return per_tok_layer * (double)seqs *
           ((double)(layers - sliding) * (double)tokens + (double)sliding * (double)win);
}

static double prefill_layer_peak(const struct gm_model *m, double ea, bool eager, uint64_t seqs,
                                 uint64_t tokens)
{
    struct est_geom g;
    double T = (double)seqs * (double)tokens;
    double h = (double)m->hidden;
    double attn, mlp;
    est_geom(m, &g);
    attn = T * ea * (g.q + g.k + g.v + g.o_in + g.latent);
    /* MoE layers run one expert at a time over its routed tokens: at most T tokens wide,
     * so the widest MLP counts (a dense layer's, a routed or a shared expert's), not the
     * sum of the experts. */
    mlp = T * ea * (m->gated_mlp ? 3.0 : 2.0) * g.mlp_widest;
    if (eager)
        attn += (double)seqs * (double)m->n_heads * (double)tokens * (double)tokens * (4.0 + ea);
    return T * ea * 2.0 * h + (attn > mlp ? attn : mlp);
}

/* An encoder's forward pass: no cache; the last hidden state stays (and a pooled output or
 * a classifier's logits). */
static enum gm_status infer_encoder(struct est_ctx *cx, uint64_t context, double ea, bool eager,
                                    struct gm_error *err)
{
    const struct gm_job *j = cx->job;
    const struct gm_model *m = cx->m;
    struct gm_estimate *e = cx->e;
    const struct gm_job_workload *w = &j->workload;
    double pre, out;
    char note[GM_EST_NOTE_MAX];
    enum gm_status st;

    if (w->new_tokens)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "--new-tokens: model '%s' is an encoder; it does not generate (its "
                       "forward pass over --context tokens is sized)",
                       m->name[0] ? m->name : m->model_type);
    pre = prefill_layer_peak(m, ea, eager, w->batch, context);
    st =
        est_add(e, GM_KIND_ACTIVATIONS, "forward_activations", est_round(pre), GM_EST_PHASE_PREFILL,
                true, GM_EXTENT_ONE_LAYER, "transient peak of one layer over the whole input", err);
    if (st != GM_OK)
        return st;
    out = (double)w->batch * (double)context * (double)m->hidden * ea;
    out += (double)w->batch * (double)m->hidden * ea * (m->pooler ? 1.0 : 0.0);
    out += (double)w->batch * (double)m->n_labels * 4.0;
    snprintf(note, sizeof note, "last hidden state%s%s of %llu x %llu tokens",
             m->pooler ? ", pooled output" : "", m->n_labels ? ", classifier logits" : "",
             (unsigned long long)w->batch, (unsigned long long)context);
    st = est_add(e, GM_KIND_ACTIVATIONS, "encoder_outputs", est_round(out), GM_EST_PHASE_PREFILL,
                 true, GM_EXTENT_HEAD, note, err);
    if (st != GM_OK)
        return st;
    est_assume(e,
               "encoder: one forward pass over batch %llu x %llu tokens without autograd; no "
               "KV cache, nothing generated; %s attention",
               (unsigned long long)w->batch, (unsigned long long)context,
               eager ? "eager (fp32 scores materialised)" : "sdpa/flash");
    return GM_OK;
}

/* The vision tower before the prefill (transformers, SDPA): one layer's transient peak over
 * the patches of every image of the batch, 16-bit: the layer input, q, k, v and the attention
 * output (5 hv) and the MLP's intermediates (gate, up and their product: 3 Iv; fc1 and its
 * activation: 2 Iv).  Says how many tokens the images add to the context. */
static double vision_layer_peak(struct est_ctx *cx, double ea)
{
    const struct gm_job *j = cx->job;
    const struct gm_model *m = cx->m;
    const struct gm_vision *v = &m->vision;
    uint64_t patches = 0, wpx, hpx, tokens;
    if (v->kind == GM_VISION_NONE || !j->workload.images)
        return 0;
    wpx = j->workload.image_width ? j->workload.image_width : 1024;
    hpx = j->workload.image_height ? j->workload.image_height : 1024;
    tokens = gm_model_image_tokens(m, wpx, hpx, &patches);
    est_assume(cx->e,
               "%llu image(s) of %llu x %llu pixels per sequence: %llu tokens each in the "
               "context (%s), %llu patches each through the vision tower",
               (unsigned long long)j->workload.images, (unsigned long long)wpx,
               (unsigned long long)hpx, (unsigned long long)tokens,
               v->kind == GM_VISION_CLIP ? "CLIP's fixed size: the image is resized"
                                         : "resized to multiples of patch x merge",
               (unsigned long long)patches);
    return (double)j->workload.batch * (double)j->workload.images * (double)patches * ea *
           (5.0 * (double)v->hidden + (v->gated_mlp ? 3.0 : 2.0) * (double)v->intermediate);
}

/* The quantised linears' extents that kernels size their buffers by: the largest in x out,
 * the widest side, the largest exllamav2 scratch (out padded to 32) and the sum of Marlin
 * workspaces (int32 of out / 128 x 16 each), over the linears the format quantises. */
struct quant_extents {
    uint64_t in_out;    /* max in x out */
    uint64_t side;      /* max of in and out */
    uint64_t exl2;      /* max exllamav2 scratch_space_fixed(), bytes */
    uint64_t marlin;    /* sum of Marlin workspaces, bytes */
    uint64_t int8_peak; /* max over linears of 3 in + 6 out (bitsandbytes int8), per token */
};

static uint64_t umax(uint64_t a, uint64_t b)
{
    return a > b ? a : b;
}

static void quant_extents(const struct est_ctx *cx, struct quant_extents *x)
{
    const struct gm_param_counts *pc = &cx->pc;
    memset(x, 0, sizeof(*x));
    for (size_t i = 0; i < pc->n_linears; i++) {
        const struct gm_linear_class *k = &pc->linears[i];
        uint64_t op = (k->out + 31) / 32 * 32;
        if (!(k->role == GM_ROLE_ATTENTION || k->role == GM_ROLE_MLP ||
              (k->role == GM_ROLE_LM_HEAD && cx->quant->lm_head)) ||
            (cx->quant->keep & (1u << k->role)))
            continue;
        x->in_out = umax(x->in_out, gm_mul_sat(k->in, k->out));
        x->side = umax(x->side, umax(k->in, k->out));
        /* qlinear_exllamav2.py: temp_dq_size in x out x 2 + 128, temp_fwd_size out x
         * max_input_len x max_batch_size x 4 + 128, at the defaults 2048 x 8 */
        x->exl2 = umax(x->exl2, k->in * op * 2 + 128 + op * 2048 * 8 * 4 + 128);
        x->marlin = gm_add_sat(x->marlin, gm_mul_sat(k->copies, k->out / 128 * 16 * 4));
        x->int8_peak = umax(x->int8_peak, 3 * k->in + 6 * k->out);
    }
}

/* The scratch of the kernel that runs a GPTQ / AWQ / LLM.int8() checkpoint's linears in HF
 * generate(), for 'rows' prompt tokens (batch x context):
 *   exllama (v1)  AutoGPTQ auto_gptq/modeling/_utils.py @005a942 autogptq_post_init: per
 *                 device temp_dq, fp16 of the largest qweight.numel() x 8 (in x out at 4
 *                 bits), and temp_state, fp16 max_input_len x the widest side with act-order
 *                 (max_input_len 2048, EXLLAMA_DEFAULT_MAX_INPUT_LENGTH, or what
 *                 exllama_set_max_input_length set; 1 x 1 without act-order)
 *   exllamav2     the same function: one ExLlamaV2DeviceTensors scratch per device of the
 *                 largest scratch_space_fixed() (qlinear_exllamav2.py @3ef391f)
 *   marlin        qlinear_marlin.py @2589b7e: each linear's int32 workspace of out / 128 x 16
 *   AWQ gemm      AutoAWQ awq/modules/linear/gemm.py @d9dc8e5 WQLinearMMFunction: 1024 tokens
 *                 or more dequantise the whole weight to fp16 for a torch.matmul, one linear
 *                 at a time
 *   LLM.int8()    bitsandbytes autograd/_functions.py @012c660 MatMul8bitLt.forward (the
 *                 igemmlt path): the input's int8 row- and column-wise copies and its col32
 *                 layout (3 x in bytes a token), the int32 product and its fp16 dequantised
 *                 output (6 x out), for the linear where that is largest */
static enum gm_status quant_kernel_scratch(struct est_ctx *cx, uint64_t rows, struct gm_error *err)
{
    const struct gm_quant *q = cx->quant;
    enum gm_quant_kernel k = cx->job->numerics.quant_kernel;
    struct gm_estimate *e = cx->e;
    struct quant_extents x;
    char note[GM_EST_NOTE_MAX];
    bool gptq4 = q->method == GM_QUANT_GPTQ && q->bits == 4;
    uint64_t len, b;

    quant_extents(cx, &x);
    if (q->method == GM_QUANT_BNB_INT8) {
        snprintf(note, sizeof(note),
                 "LLM.int8() matmul of %llu prompt tokens: the input's int8 copies and the int32 "
                 "product of the widest linear",
                 (unsigned long long)rows);
        return est_add(e, GM_KIND_GATHERED, "int8_matmul_buffers", gm_mul_sat(rows, x.int8_peak),
                       GM_EST_PHASE_PREFILL, true, GM_EXTENT_ONE_LAYER, note, err);
    }
    if (q->method != GM_QUANT_GPTQ && q->method != GM_QUANT_AWQ)
        return GM_OK;
    if (k == GM_QKERNEL_AUTO)
        k = gptq4                       ? GM_QKERNEL_EXLLAMA
            : q->method == GM_QUANT_AWQ ? GM_QKERNEL_GEMM
                                        : GM_QKERNEL_PLAIN;
    if ((k == GM_QKERNEL_GEMM) != (q->method == GM_QUANT_AWQ) ||
        ((k == GM_QKERNEL_EXLLAMA || k == GM_QKERNEL_EXLLAMAV2 || k == GM_QKERNEL_MARLIN) &&
         !gptq4)) {
        est_assume(e, "--quant-kernel %s: not a kernel of %u-bit %s weights, no scratch counted",
                   gm_quant_kernel_name(k), q->bits, q->method == GM_QUANT_AWQ ? "AWQ" : "GPTQ");
        return GM_OK;
    }
    switch (k) {
    case GM_QKERNEL_EXLLAMA:
        len = q->desc_act ? umax(2048, rows) : 1;
        b = gm_add_sat(gm_mul_sat(x.in_out, 2), gm_mul_sat(len * 2, q->desc_act ? x.side : 1));
        snprintf(note, sizeof(note), "exllama temp_dq (the largest linear in fp16)%s",
                 q->desc_act ? " + temp_state (max_input_len x the widest side, fp16)" : "");
        if (q->desc_act && rows > 2048)
            est_assume(e,
                       "exllama with act-order: prompts of %llu tokens need "
                       "exllama_set_max_input_length(model, %llu) (the default 2048 fails); "
                       "temp_state sized for it",
                       (unsigned long long)rows, (unsigned long long)rows);
        return est_add(e, GM_KIND_ENGINE_POOL, "exllama_buffers", b, GM_EST_PHASE_INFER_ALL, false,
                       GM_EXTENT_ONE_LAYER, note, err);
    case GM_QKERNEL_EXLLAMAV2:
        return est_add(e, GM_KIND_ENGINE_POOL, "exllamav2_scratch", x.exl2, GM_EST_PHASE_INFER_ALL,
                       false, GM_EXTENT_ONE_LAYER,
                       "exllamav2 scratch for the largest linear: its fp16 weight + an fp32 "
                       "output of 2048 x 8 rows",
                       err);
    case GM_QKERNEL_MARLIN:
        return est_add(e, GM_KIND_ENGINE_POOL, "marlin_workspace", x.marlin, GM_EST_PHASE_INFER_ALL,
                       false, GM_EXTENT_ALL_LAYERS, "Marlin's int32 workspace of every linear",
                       err);
    case GM_QKERNEL_GEMM:
        if (rows < 1024)
            return GM_OK; /* fewer tokens: the fused gemm kernel, no copy */
        return est_add(e, GM_KIND_GATHERED, "awq_dequant_buffer", gm_mul_sat(x.in_out, 2),
                       GM_EST_PHASE_PREFILL, true, GM_EXTENT_ONE_LAYER,
                       "AWQ gemm: the largest linear dequantised to fp16 for a prompt of 1024 "
                       "tokens or more",
                       err);
    default:
        return GM_OK;
    }
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
    bool seq2seq = m && m->head == GM_HEAD_SEQ2SEQ_LM;
    uint64_t tokens, context;
    bool eager = j->memory.attention == GM_ATTN_EAGER;
    char note[GM_EST_NOTE_MAX];
    double kv, pre, vis, logits, dec;
    uint64_t capped = 0;
    enum gm_status st;
    enum hf_generate gen;
    enum hf_window_cache wincache;
    bool full_logits;

    if (j->mode != GM_EST_INFER)
        return GM_OK;
    if (!m)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "inference estimate needs a model for the KV cache (give MODEL)");
    if (est_engine_max_len(j, m) && w->context + w->new_tokens > est_engine_max_len(j, m)) {
        if (est_engine_max_len(j, m) == m->max_positions)
            est_assume(e,
                       "context + new tokens = %llu exceed the model's max_position_embeddings "
                       "%llu",
                       (unsigned long long)(w->context + w->new_tokens),
                       (unsigned long long)m->max_positions);
        else
            est_assume(e,
                       "context + new tokens = %llu exceed the %llu tokens %s serves the model "
                       "at (max_position_embeddings %llu, rope_scaling %s x %g)",
                       (unsigned long long)(w->context + w->new_tokens),
                       (unsigned long long)est_engine_max_len(j, m), gm_engine_name(j->engine.kind),
                       (unsigned long long)m->max_positions, gm_rope_scaling_name(m->rope_scaling),
                       m->rope_factor);
    }
    if (m->head != GM_HEAD_CAUSAL_LM && est_allocator(j) != EST_ALLOC_TORCH)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "--engine %s: model '%s' is an %s; its %s accounting is not modelled (size "
                       "it without --engine, or with --engine hf)",
                       gm_engine_name(j->engine.kind), m->name[0] ? m->name : m->model_type,
                       m->head == GM_HEAD_ENCODER ? "encoder" : "encoder-decoder",
                       gm_engine_name(j->engine.kind));
    if (est_allocator(j) != EST_ALLOC_TORCH)
        return GM_OK; /* an engine with its own memory manager accounts for itself */
    /* PyTorch's cuBLAS workspace, from the first GEMM of the prefill */
    if ((st = est_add_torch_workspaces(cx, err)) != GM_OK)
        return st;
    /* a context not given is a named assumption (not a range); an encoder-decoder's cache
     * holds the generated tokens (and its start token) in the self-attention, the encoder's
     * output in the cross-attention, in every decoder layer */
    context = w->context;
    if (!est_given(j, EST_SET_CONTEXT))
        est_length_assumed(cx, "context", context, "--context");
    tokens = context + w->new_tokens + (seq2seq ? 1 : 0);
    if (m->head == GM_HEAD_ENCODER)
        return infer_encoder(cx, context, ea, eager, err);
    gen = hf_generate_form(j->stack.transformers);
    wincache = hf_window_cache(j, m, gen);

    kv = kv_tokens_bytes(m, tokens, kvb, w->batch, wincache != HF_WINDOW_EVERY_TOKEN, &capped);
    if (m->kv_lora_rank)
        snprintf(note, sizeof(note),
                 "%llu layers x %llu heads x (%llu + %llu) decompressed K/V x %llu tokens x %g B "
                 "x %llu seqs",
                 (unsigned long long)est_kv_layers(m), (unsigned long long)m->n_heads,
                 (unsigned long long)m->head_dim,
                 (unsigned long long)(m->head_dim_v ? m->head_dim_v : m->head_dim),
                 (unsigned long long)tokens, kvb, (unsigned long long)w->batch);
    else
        snprintf(note, sizeof(note),
                 "2 x %llu layers x %llu KV heads x %llu head_dim x %llu "
                 "tokens x %g B x %llu seqs%s",
                 (unsigned long long)est_kv_layers(m), (unsigned long long)m->n_kv_heads,
                 (unsigned long long)m->head_dim, (unsigned long long)tokens, kvb,
                 (unsigned long long)w->batch, capped ? " (window-capped layers)" : "");
    st = est_add(e, GM_KIND_KV_CACHE, "kv_cache", est_round(kv), GM_EST_PHASE_INFER_ALL, false,
                 GM_EXTENT_ALL_LAYERS, note, err);
    if (st != GM_OK)
        return st;
    if (m->n_linear_layers) {
        /* per linear-attention layer and sequence the convolution state (the whole kernel,
         * model dtype) and the recurrent state: Qwen3NextDynamicCache's in fp32 as the
         * gated-delta-rule kernels return it, HybridMambaAttentionDynamicCache's (Jamba) in
         * the model dtype */
        uint64_t rec, conv;
        double b, rb = m->mamba_d_inner ? ea : 4.0;
        gm_model_linear_state(m, false, &rec, &conv);
        b = (double)w->batch * (double)m->n_linear_layers * (rb * (double)rec + ea * (double)conv);
        snprintf(note, sizeof(note),
                 "%llu linear-attention layers x %llu seqs: recurrent state %llu x %g B + "
                 "convolution state %llu x %g B, whatever the length",
                 (unsigned long long)m->n_linear_layers, (unsigned long long)w->batch,
                 (unsigned long long)rec, rb, (unsigned long long)conv, ea);
        st = est_add(e, GM_KIND_KV_CACHE, "recurrent_state", est_round(b), GM_EST_PHASE_INFER_ALL,
                     false, GM_EXTENT_ALL_LAYERS, note, err);
        if (st != GM_OK)
            return st;
    }
    if (seq2seq) {
        double enc = (double)w->batch * (double)context * (double)m->hidden * ea;
        st = est_add(e, GM_KIND_ACTIVATIONS, "encoder_outputs", est_round(enc),
                     GM_EST_PHASE_INFER_ALL, false, GM_EXTENT_ENDS,
                     "the encoder's last hidden state, kept while the decoder generates", err);
        if (st != GM_OK)
            return st;
    }

    pre = context ? prefill_layer_peak(m, ea, eager, w->batch, context) : 0;
    vis = vision_layer_peak(cx, ea);
    st = est_add(e, GM_KIND_ACTIVATIONS, "prefill_activations", est_round(vis > pre ? vis : pre),
                 GM_EST_PHASE_PREFILL, true, GM_EXTENT_ONE_LAYER,
                 vis > pre ? "transient peak of one vision-tower layer over the images' patches"
                 : seq2seq ? "transient peak of one encoder layer over the whole input"
                           : "transient peak of one layer over the whole prompt",
                 err);
    if (st != GM_OK)
        return st;
    if (cx->quant &&
        (cx->quant->method == GM_QUANT_BNB_NF4 || cx->quant->method == GM_QUANT_BNB_FP4) &&
        w->batch * context > 1) {
        /* bitsandbytes matmul_4bit (bitsandbytes/autograd/_functions.py, 0.43.3): an input of
         * more than one token goes through MatMul4Bit, which dequantises the whole weight
         * to the compute dtype for the matmul (one linear at a time); one token per step
         * takes the gemv_4bit kernel, no copy */
        /* the largest linear the format quantises (Lightning's: the lm_head), and with
         * Lightning's fp16 quantisation state its cast to the compute dtype beside it
         * (est_bnb_dequant_copies()) */
        uint64_t big = est_largest_linear(m), copies = est_bnb_dequant_copies(j);
        if (cx->quant->lm_head && cx->pc.lm_head > big)
            big = cx->pc.lm_head;
        st = est_add(e, GM_KIND_GATHERED, "nf4_dequant_buffer",
                     gm_mul_sat(big, (uint64_t)ea * copies), GM_EST_PHASE_PREFILL, true,
                     GM_EXTENT_ONE_LAYER,
                     copies > 1 ? "the largest linear dequantised to fp16 for the prompt's "
                                  "matmul, and its cast to the compute dtype"
                                : "the largest linear dequantised to 16 bit for the prompt's "
                                  "matmul",
                     err);
        if (st != GM_OK)
            return st;
        est_set_tensors(e, (unsigned)copies); /* each copy its own tensor (stage_adapters.c) */
    }
    if (cx->quant && (st = quant_kernel_scratch(cx, w->batch * context, err)) != GM_OK)
        return st;
    full_logits = (w->full_logits || gen == GEN_LEGACY || gen == GEN_CACHE_ALL_LOGITS) && !seq2seq;
    logits = (double)w->batch * (full_logits ? (double)(context ? context : 1) : 1.0) *
             (double)m->vocab * (ea + 4.0);
    st = est_add(e, GM_KIND_LOGITS, "logits", est_round(logits), GM_EST_PHASE_PREFILL, true,
                 GM_EXTENT_HEAD,
                 full_logits ? "every prompt position, compute dtype + fp32"
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
    if (gen != GEN_NONE && !seq2seq && w->new_tokens && !w->static_cache &&
        wincache != HF_WINDOW_HYBRID_STATIC) {
        /* the cache growing by concatenation at the last decode step: the legacy tuple
         * cache keeps the previous step's whole cache until the forward returns the new
         * one; DynamicCache.update replaces one layer's tensors at a time */
        double layers = (double)est_kv_layers(m);
        double prev = gen == GEN_LEGACY ? kv : (layers > 0 ? kv / layers : 0);
        st = est_add(e, GM_KIND_KV_CACHE, "kv_cache_concat", est_round(prev), GM_EST_PHASE_DECODE,
                     true, gen == GEN_LEGACY ? GM_EXTENT_ALL_LAYERS : GM_EXTENT_ONE_LAYER,
                     gen == GEN_LEGACY ? "the previous step's tuple cache, alive while torch.cat "
                                         "builds the next"
                                       : "one layer's cache, replaced by torch.cat in "
                                         "DynamicCache.update",
                     err);
        if (st != GM_OK)
            return st;
    }

    if (m->kv_lora_rank)
        est_assume(e,
                   "KV cache as transformers keeps it for MLA: %llu heads x (%llu key + %llu "
                   "value) decompressed per token and layer, %g bytes per element (vLLM and "
                   "llama.cpp keep the %llu-wide latent instead: --engine vllm)",
                   (unsigned long long)m->n_heads, (unsigned long long)m->head_dim,
                   (unsigned long long)(m->head_dim_v ? m->head_dim_v : m->head_dim), kvb,
                   (unsigned long long)(m->kv_lora_rank + m->qk_rope_head_dim));
    else
        est_assume(e,
                   "KV cache: num_key_value_heads=%llu (not the %llu query heads), "
                   "head_dim=%llu, %g bytes per element, preallocated for context + "
                   "new tokens = %llu",
                   (unsigned long long)m->n_kv_heads, (unsigned long long)m->n_heads,
                   (unsigned long long)m->head_dim, kvb, (unsigned long long)tokens);
    if (wincache == HF_WINDOW_EVERY_TOKEN)
        est_assume(e,
                   "transformers before 4.56: generate()'s %s keeps every token in the "
                   "%llu sliding-window layers too (a window of %llu kept only from 4.56's "
                   "DynamicSlidingWindowLayer)",
                   gen == GEN_LEGACY ? "legacy tuple cache" : "DynamicCache",
                   (unsigned long long)est_kv_sliding_layers(m),
                   (unsigned long long)m->sliding_window);
    if (seq2seq)
        est_assume(e,
                   "encoder-decoder: the encoder runs once over the %llu context tokens; each of "
                   "the %llu decoder layers caches the keys and values of the encoder's output "
                   "(cross-attention) and of the %llu generated tokens",
                   (unsigned long long)context, (unsigned long long)m->n_decoder_layers,
                   (unsigned long long)(w->new_tokens + 1));
    if (capped)
        est_assume(e,
                   "%llu of %llu layers keep only the last %llu tokens (%s; an engine "
                   "that keeps every token needs more)",
                   (unsigned long long)capped, (unsigned long long)est_kv_layers(m),
                   (unsigned long long)m->sliding_window,
                   m->chunked_attention ? "chunked attention" : "sliding window");
    est_assume(e, "prefill of the whole prompt in one pass (no chunking), %s attention",
               eager ? "eager (fp32 scores materialised)" : "sdpa/flash");
    if (gen == GEN_LEGACY)
        est_assume(e, "transformers before 4.36: the legacy tuple cache (the previous step's "
                      "cache alive while torch.cat builds the next) and the prefill's logits "
                      "at every prompt position, fp32");
    else if (gen == GEN_CACHE_ALL_LOGITS || gen == GEN_CACHE)
        est_assume(e, "transformers %s: %s; the prefill%s",
                   gen == GEN_CACHE ? "from 4.45" : "4.36 to 4.44",
                   wincache == HF_WINDOW_HYBRID_STATIC
                       ? "the model's default hybrid cache (until 4.56), preallocated and "
                         "written in place"
                       : "DynamicCache grows one layer at a time by torch.cat",
                   gen == GEN_CACHE ? " projects the last position only"
                                    : "'s logits at every prompt position, fp32 "
                                      "(num_logits_to_keep from 4.45)");
    est_assume(e, "no engine pool: serving engines (vLLM, TGI) reserve a fraction of "
                  "the GPU for KV blocks up front");
    est_stack_assume(cx);
    return GM_OK;
}
