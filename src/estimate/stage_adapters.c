/* SPDX-License-Identifier: MIT */
/* stage_adapters.c - LoRA and QLoRA fine-tuning: the adapter stage turns the training
 * stage's full fine-tune into a frozen base with trainable adapters.
 *
 * LoRA (Hu et al. 2021; PEFT's LoraConfig): every targeted linear W (in x out) of every
 * decoder layer gets A (in x r) and B (r x out): r * (in + out) trainable parameters.  The
 * base is frozen: no gradients, no optimizer state, no fp32 master copy; it is held in the
 * compute dtype (16-bit unless --precision fp32).  Adapters are fp32 (PEFT casts adapter
 * weights to fp32 by default, autocast_adapter_dtype) and get gradients, optimizer state
 * and step temporaries as in full training.  Activations stay those of the full model
 * (gradients still flow through every layer to the earliest adapter), plus what the
 * adapters save: the r-wide output of A per targeted linear, and with lora_dropout a
 * dropped-out copy of the input and its mask.
 *
 * QLoRA (Dettmers et al. 2023; bitsandbytes Linear4bit): the linear weights are NF4, 4
 * bits per weight plus one absmax per block of 64 weights: fp32 (32/64 = 0.5 bit per
 * weight) or, with double quantisation, 8-bit absmax plus one fp32 constant per 256 blocks
 * (8/64 + 32/(64*256) = 0.127 bit per weight), sized by the bitsandbytes weight format
 * (weights.c; bitsandbytes converts the MoE router too).  Embeddings, lm_head, norms and
 * biases stay in bf16 (fp32 after PEFT's upcast).  Each linear is dequantised to bf16 for
 * its matmul (forward and backward): a transient the size of the largest linear in bf16.
 * LoRA on a quantised checkpoint (GPTQ-LoRA) keeps the base as stored. */
#include "estimate/estimate_int.h"

#include <stdio.h>
#include <string.h>

/* in/out widths of the eight projections a target flag can name. */
static void proj_dims(const struct gm_model *m, unsigned t, uint64_t *in, uint64_t *out)
{
    uint64_t q = m->n_heads * m->head_dim, kv = m->n_kv_heads * m->head_dim;
    switch (t) {
    case GM_LORA_QKV:
        *in = m->hidden, *out = q + 2 * kv;
        break;
    case GM_LORA_Q:
        *in = m->hidden, *out = q;
        break;
    case GM_LORA_K:
    case GM_LORA_V:
        *in = m->hidden, *out = kv;
        break;
    case GM_LORA_O:
        *in = q, *out = m->hidden;
        break;
    case GM_LORA_GATE:
        *in = m->gated_mlp ? m->hidden : 0, *out = m->gated_mlp ? m->intermediate : 0;
        break;
    case GM_LORA_UP:
        *in = m->hidden, *out = m->intermediate;
        break;
    default: /* down */
        *in = m->intermediate, *out = m->hidden;
        break;
    }
}

uint64_t gm_lora_params(const struct gm_model *m, uint64_t rank, unsigned targets)
{
    /* attention targets exist in the layers that attend, MLP targets in those with an MLP
     * (hybrids: not in linear-attention layers or Nemotron-H's other blocks) */
    uint64_t attn = 0, mlp = 0, experts = m->n_experts ? m->n_experts : 1;
    for (unsigned t = GM_LORA_Q; t <= GM_LORA_QKV; t <<= 1) {
        uint64_t in = 0, out = 0, p;
        if (!(targets & t))
            continue;
        proj_dims(m, t, &in, &out);
        p = gm_mul_sat(rank, gm_add_sat(in, out));
        if (t & GM_LORA_MLP)
            mlp = gm_add_sat(mlp, gm_mul_sat(p, experts));
        else
            attn = gm_add_sat(attn, p);
    }
    return gm_add_sat(gm_mul_sat(attn, gm_model_attention_layers(m)),
                      gm_mul_sat(mlp, gm_model_mlp_layers(m)));
}

/* Optimizer state bytes per trainable parameter, for state kept at 'sb' bytes. */
static uint64_t opt_state_per_param(enum gm_optimizer o, unsigned sb)
{
    switch (o) {
    case GM_OPT_ADAMW:
    case GM_OPT_ADAM:
        return 2 * (uint64_t)sb;
    case GM_OPT_ADAMW_8BIT:
        return 2;
    case GM_OPT_SGD_MOMENTUM:
    case GM_OPT_LION:
        return sb;
    case GM_OPT_ADAFACTOR: /* adapters are thin matrices: factoring saves little */
        return sb;
    default:
        return 0;
    }
}

enum est_lora_base est_lora_base(const struct gm_job *j)
{
    const struct gm_quant *q = est_job_quant(j);
    if (j->memory.adapter == GM_ADAPTER_NONE)
        return EST_LORA_BASE_PLAIN;
    if (j->memory.adapter == GM_ADAPTER_QLORA)
        return EST_LORA_BASE_BNB4;
    return q && q->method == GM_QUANT_GPTQ ? EST_LORA_BASE_GPTQ : EST_LORA_BASE_PLAIN;
}

/* Whether unsloth's fused LoRA functions run the adapter of target 't' of a job: the job
 * asks for them (--fused-kernels lora) on a base FOAK fuses, and fms-acceleration's FOAK
 * rules (plugins/fused-ops-and-kernels models/llama.py, mistral.py, mixtral.py at 733992a,
 * trigger_fused_ops in models/utils.py) replace q, k and v together when all three are LoRA
 * layers (LoRA_QKV) and o alone (LoRA_W).  FOAK fuses only on a quantised base:
 * framework_plugin_fast_kernels.py at 733992a omits "fused_lora" where the model has no
 * quantization_method, and its base_layer is "auto_gptq" or "bitsandbytes" (4-bit: the bnb
 * functions dequantise with fast_dequantize).  Their LoRA_MLP (the MLP's three together)
 * also changes what the MLP itself saves, which is not modelled: MLP adapters are counted
 * as PEFT runs them. */
bool est_fused_lora_runs(const struct gm_job *j, unsigned t)
{
    const unsigned qkv = GM_LORA_Q | GM_LORA_K | GM_LORA_V;
    unsigned targets = j->memory.lora.targets;
    if (est_lora_base(j) == EST_LORA_BASE_PLAIN || !(j->memory.fused_kernels & GM_FUSED_LORA) ||
        !(targets & t))
        return false;
    if (t & qkv)
        return (targets & qkv) == qkv;
    return t == GM_LORA_O;
}

enum gm_status est_stage_adapters(struct est_ctx *cx, struct gm_error *err)
{
    const struct gm_job *j = cx->job;
    const struct gm_job_lora *lo = &j->memory.lora;
    const struct gm_model *m = cx->m;
    struct gm_estimate *e = cx->e;
    bool qlora = j->memory.adapter == GM_ADAPTER_QLORA;
    bool trl_cast = est_trl_casts_embeddings_bf16(j, m);
    uint64_t n = cx->n, pa, frozen_bytes, adapter_b, per_target_act = 0, quantised = 0, consts = 0;
    unsigned ab = est_adapter_bytes(j), sb, ntargets = 0, rest_b = est_frozen_rest_bytes(j);
    unsigned ea = est_weight_elem_bytes(j->numerics.precision);
    double layers_saved, n_ck;
    bool recomputed;
    char note[GM_EST_NOTE_MAX];
    enum gm_status st;

    if (j->mode != GM_EST_TRAIN || j->memory.adapter == GM_ADAPTER_NONE)
        return GM_OK;
    if (!m)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "LoRA needs a model (its layer shapes decide the adapter size)");
    if (lo->rank == 0 || lo->rank > m->hidden)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "--lora-rank %llu must be between 1 and the hidden size %llu",
                       (unsigned long long)lo->rank, (unsigned long long)m->hidden);
    if ((lo->targets & GM_LORA_QKV) && !gm_arch_fused_qkv(m->arch))
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "--lora-targets qkv: model '%s' (%s) has separate q, k and v projections "
                       "(target q,k,v)",
                       m->name[0] ? m->name : m->model_type, gm_arch_name(m->arch));
    pa = gm_lora_params(m, lo->rank, lo->targets);
    e->lora.trainable_params = pa;
    e->lora.frozen_params = n;
    /* Drop the full-training model states: the base is frozen. */
    for (size_t i = e->n_components; i-- > 0;) {
        switch (e->components[i].kind) {
        case GM_KIND_WEIGHTS:
        case GM_KIND_MASTER_WEIGHTS:
        case GM_KIND_WEIGHT_COPIES:
        case GM_KIND_GRADIENTS:
        case GM_KIND_OPTIMIZER_STATE:
        case GM_KIND_OPTIMIZER_TEMP:
        case GM_KIND_MANAGED: /* paged optimizer state */
            est_remove(e, i);
            break;
        default:
            break;
        }
    }
    if (qlora) {
        /* the frozen base in bitsandbytes NF4, as the weight formats size it (weights.c):
         * the linears 4-bit (biases excluded), the rest in est_frozen_rest_bytes() */
        struct gm_quant nf4;
        struct est_format f;
        gm_quant_init(&nf4, GM_QUANT_BNB_NF4);
        nf4.lm_head = est_bnb_lightning(j); /* Lightning converts every linear */
        nf4.double_quant = lo->double_quant;
        nf4.group_size = lo->block ? lo->block : 64;
        est_format_weights(&cx->pc, &nf4, rest_b, &f);
        quantised = f.quantised;
        consts = f.constants;
        frozen_bytes = f.bytes;
        if (trl_cast) {
            /* the embedding and the unquantised lm_head were counted at rest_b (fp32) */
            uint64_t head = nf4.lm_head ? 0 : cx->pc.lm_head;
            uint64_t cast = gm_mul_sat(gm_add_sat(cx->pc.embedding, head), rest_b - 2);
            frozen_bytes = frozen_bytes > cast ? frozen_bytes - cast : 0;
        }
        e->lora.nf4_constant_bytes = consts;
        snprintf(note, sizeof note,
                 "%llu linear weights in NF4 (0.5 B) + %llu B of %s constants, %llu other params "
                 "in %s",
                 (unsigned long long)quantised, (unsigned long long)consts,
                 lo->double_quant ? "double-quantised" : "fp32 absmax",
                 (unsigned long long)(n - quantised),
                 trl_cast      ? "fp32 (embeddings and lm_head bf16)"
                 : rest_b == 4 ? "fp32"
                               : "bf16");
    } else if (cx->quant && cx->format_bytes) {
        /* ---- weight formats: adapters on a quantised base (GPTQ-LoRA) ---- */
        frozen_bytes = cx->format_bytes;
        snprintf(note, sizeof note, "frozen %s base as stored (no gradients, no optimizer state)",
                 gm_quant_method_name(cx->quant->method));
    } else {
        frozen_bytes = gm_mul_sat(n, rest_b);
        snprintf(note, sizeof note,
                 "%llu frozen parameters x %u B (no gradients, no optimizer state)",
                 (unsigned long long)n, rest_b);
    }
    e->lora.base_weight_bytes = frozen_bytes;
    st = est_add(e, GM_KIND_WEIGHTS, "weights", frozen_bytes, GM_EST_PHASE_TRAIN_ALL, false,
                 GM_EXTENT_ALL_LAYERS, note, err);
    if (st)
        return st;

    adapter_b = gm_mul_sat(pa, ab);
    snprintf(note, sizeof note, "%llu adapter parameters (rank %llu) x %u B",
             (unsigned long long)pa, (unsigned long long)lo->rank, ab);
    if ((st = est_add(e, GM_KIND_ADAPTERS, "lora_adapters", adapter_b, GM_EST_PHASE_TRAIN_ALL,
                      false, GM_EXTENT_ALL_LAYERS, note, err)))
        return st;
    snprintf(note, sizeof note, "adapter gradients, %u B each", ab);
    if ((st = est_add(e, GM_KIND_GRADIENTS, "lora_gradients", adapter_b, est_gradient_phases(j),
                      false, GM_EXTENT_ALL_LAYERS, note, err)))
        return st;
    {
        /* a paged optimizer (bitsandbytes) pages only tensors of 1e5 elements or more: A is
         * r x in, B r x out */
        bool paged = j->memory.paged_optimizer && gm_mul_sat(lo->rank, m->hidden) >= 100000;
        uint64_t osb = gm_mul_sat(
            pa, opt_state_per_param(j->numerics.optimizer, j->memory.paged_optimizer ? 4 : ab));
        snprintf(note, sizeof note, "%s state of the adapters only%s",
                 gm_optimizer_name(j->numerics.optimizer),
                 paged ? " (paged: cudaMallocManaged)" : "");
        if (osb && (st = est_add(e, paged ? GM_KIND_MANAGED : GM_KIND_OPTIMIZER_STATE,
                                 "lora_optimizer_state", osb, GM_EST_PHASE_TRAIN_ALL, false,
                                 GM_EXTENT_ALL_LAYERS, note, err)))
            return st;
        if (j->numerics.optim_impl == GM_OPTIM_FOREACH && osb && !j->memory.paged_optimizer &&
            (st = est_add(e, GM_KIND_OPTIMIZER_TEMP, "lora_optimizer_step_temp", adapter_b,
                          GM_EST_PHASE_OPTIMIZER_STEP, true, GM_EXTENT_ALL_LAYERS,
                          "foreach step temporaries, one adapter-sized copy", err)))
            return st;
    }
    /* What the adapters save for backward per targeted linear: A's r-wide output (kept by
     * B) and the input A keeps: with dropout its mask and the dropped-out copy, without
     * dropout a copy cast to the adapter dtype (PEFT casts the input to lora_A's dtype), or
     * nothing beyond the layer's own tensor when the dtypes agree (the training stage
     * counts it).  Under autocast A and B run in the 16-bit compute dtype whatever the
     * adapters' dtype: A keeps autocast's 16-bit cast of its input (the fp32 dropped-out
     * copy or PEFT's fp32 cast is freed once cast) and its output is 16-bit (peft 0.13.2
     * tuners/lora layer.py Linear.forward).  PEFT's bitsandbytes layers skip that cast under
     * autocast (bnb.py Linear4bit.forward): on a 16-bit stream without dropout A keeps the
     * layer's input itself, which q, k and v share; it is counted per adapter here. */
    sb = est_precision_autocast(j->numerics.precision) ? 2 : ab;
    for (unsigned t = GM_LORA_Q; t <= GM_LORA_QKV; t <<= 1) {
        uint64_t i_dim = 0, o_dim = 0;
        if (!(lo->targets & t))
            continue;
        proj_dims(m, t, &i_dim, &o_dim);
        if (!i_dim)
            continue;
        ntargets++;
        if (est_fused_lora_runs(j, t)) {
            /* unsloth's fused LoRA (FOAK fused_lora; fused_ops/unsloth_lora/bnb/fast_lora.py
             * and utils.py matmul_lora at 733992a): one autograd function computes the base
             * matmul and X @ A @ B in the input's dtype and saves X and, with dropout, the
             * dropped-out copy it made of X (no mask, no r-wide output: the backward
             * recomputes X @ A), in the stream's dtype.  X is o's attention output, which
             * attention keeps anyway; q, k and v share their X, the norm's output, which
             * nothing else keeps unless the layer counts it (no dropout, same dtype). */
            uint64_t xb = (uint64_t)est_residual_bytes(j, m);
            if (lo->dropout > 0)
                per_target_act = gm_add_sat(per_target_act, gm_mul_sat(i_dim, xb));
            if (t == GM_LORA_Q && (lo->dropout > 0 || ab != ea))
                per_target_act = gm_add_sat(per_target_act, gm_mul_sat(i_dim, xb));
            continue;
        }
        per_target_act = gm_add_sat(per_target_act, gm_mul_sat(lo->rank, sb));
        if (lo->dropout > 0)
            per_target_act = gm_add_sat(per_target_act, gm_mul_sat(i_dim, 1 + sb));
        else if (ab != ea)
            per_target_act = gm_add_sat(per_target_act, gm_mul_sat(i_dim, sb));
    }
    /* checkpointed layers keep none of it; the layer being recomputed all of it */
    n_ck = (double)est_layers_checkpointed(j, est_total_layers(m));
    layers_saved = j->memory.checkpointing == GM_CKPT_OP ? 0.0 : (double)est_total_layers(m) - n_ck;
    recomputed = n_ck > 0 || j->memory.checkpointing == GM_CKPT_OP;
    if (ntargets && layers_saved > 0) {
        uint64_t b = est_round(cx->tokens * (double)per_target_act * layers_saved);
        snprintf(note, sizeof note,
                 "A outputs (r = %llu, %u B)%s of %u targeted linears x %.0f layers",
                 (unsigned long long)lo->rank, sb,
                 lo->dropout > 0 ? " and dropout copies" : (ab != ea ? " and input casts" : ""),
                 ntargets, layers_saved);
        if ((st = est_add(e, GM_KIND_ACTIVATIONS, "lora_activations", b, GM_EST_PHASE_SAVED, true,
                          GM_EXTENT_ALL_LAYERS, note, err)))
            return st;
    }
    if (ntargets && recomputed &&
        (st = est_add(e, GM_KIND_ACTIVATIONS, "lora_recomputed",
                      est_round(cx->tokens * (double)per_target_act), GM_EST_PHASE_FORWARD_BACKWARD,
                      true, GM_EXTENT_ONE_LAYER,
                      "the adapters' tensors of the layer being recomputed", err)))
        return st;
    if (qlora) {
        /* a layer's largest linear dequantised beside its successor's; Lightning's
         * quantised lm_head alone, each with its cast from the fp16 state
         * (est_bnb_dequant_copies()).  Each copy is a tensor of its own: dequantize_4bit
         * allocates its output per call, torch.empty(quant_state.shape, ...), and the cast
         * is another (bitsandbytes 0.43.3 functional.py dequantize_4bit, autograd/
         * _functions.py MatMul4Bit.forward and .backward) */
        uint64_t copies = est_bnb_dequant_copies(j);
        uint64_t b = gm_mul_sat(est_largest_linear(m), 2 * (1 + copies));
        uint64_t head = est_bnb_lightning(j) ? gm_mul_sat(cx->pc.lm_head, 2 * copies) : 0;
        if ((st = est_add(e, GM_KIND_GATHERED, "nf4_dequant_buffer", head > b ? head : b,
                          GM_EST_PHASE_FORWARD_BACKWARD, true, GM_EXTENT_ONE_LAYER,
                          head > b ? (copies > 1 ? "the lm_head dequantised to fp16 and cast to "
                                                   "bf16 during its matmul (Lightning's "
                                                   "BitsandbytesPrecision)"
                                                 : "the lm_head dequantised to fp16 for its "
                                                   "matmul (Lightning's BitsandbytesPrecision)")
                                   : "bf16 dequantised copy of the largest linear (and its "
                                     "successor) during its matmul",
                          err)))
            return st;
        est_set_tensors(e, (unsigned)(head > b ? copies : 1 + copies));
        if (trl_cast)
            est_assume(e,
                       "QLoRA: NF4 blocks of %llu, %s (bitsandbytes, bf16 compute); norms and "
                       "biases in fp32 (PEFT prepare_model_for_kbit_training), embeddings and "
                       "lm_head cast back to bf16 (TRL's SFTTrainer, peft_module_casting_to_bf16)",
                       (unsigned long long)(lo->block ? lo->block : 64),
                       lo->double_quant ? "double quantisation" : "fp32 absmax");
        else if (est_trl_casts_bf16(j))
            est_assume(e,
                       "QLoRA: TRL's peft_module_casting_to_bf16 not applied to the embeddings "
                       "and lm_head: %s's Hugging Face module names were not read; they stay "
                       "fp32 (PEFT prepare_model_for_kbit_training)",
                       gm_arch_name(m->arch));
        if (!trl_cast)
            est_assume(e,
                       "QLoRA: NF4 blocks of %llu, %s (bitsandbytes, bf16 compute); "
                       "embeddings, %snorms, biases in %s",
                       (unsigned long long)(lo->block ? lo->block : 64),
                       lo->double_quant ? "double quantisation" : "fp32 absmax",
                       est_bnb_lightning(j) ? "" : "lm_head, ",
                       rest_b == 4 ? "fp32 (PEFT prepare_model_for_kbit_training)"
                                   : "bf16 (--no-fp32-upcast)");
    }
    est_assume(e,
               "LoRA: %llu trainable parameters (%.3f%% of %llu), adapters %s%s with "
               "their gradients and optimizer state; base frozen",
               (unsigned long long)pa, n ? 100.0 * (double)pa / (double)n : 0.0,
               (unsigned long long)n, ab == 4 ? "fp32" : "bf16",
               ab == 2 && j->memory.adapter_dtype == GM_DTYPE_UNKNOWN &&
                       est_trl_casts_adapters_bf16(j)
                   ? " (TRL before 0.9: peft_module_casting_to_bf16 casts them)"
                   : "");
    est_assume(e,
               "LoRA: frozen linears and norms keep no input for backward (a matmul keeps "
               "its input only for its weight's gradient); the residual stream is %s",
               est_residual_bytes(j, m) == 2.0         ? "16-bit"
               : j->memory.adapter != GM_ADAPTER_QLORA ? "fp32"
               : lo->fp32_upcast                       ? "fp32 (upcast norms)"
                                                       : "fp32 (behind LayerNorm)");
    return GM_OK;
}
