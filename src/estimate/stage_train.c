/* SPDX-License-Identifier: MIT */
/* stage_train.c - the training stage: memory of one training step: weights, gradients,
 * optimizer state, step temporaries, saved activations, the loss and the backward
 * temporaries.
 *
 * Two methods:
 *  - arch (default): per-tensor accounting from the architecture.  Saved activations
 *    follow Korthikanti et al. 2022 (sbh(34 + 5as/h) per layer for 16-bit GPT layers),
 *    re-derived per tensor for the real layer layout and for what autograd keeps: a matmul
 *    keeps its input only when its weight (or an adapter reading that input) needs a
 *    gradient; HF's eager RMSNorm keeps an fp32 copy of its input and, when its weight is
 *    trained, the normalised tensor; gated MLPs keep four I-wide tensors; eager attention
 *    with GQA saves the repeated K/V; rotary embeddings keep nothing per token (q * cos +
 *    rotate_half(q) * sin saves only cos and sin); SDPA/flash keeps no s*s scores.
 *  - blog: the HF blog formula N*P + 2NP + max(2NP, A*B*L*P), A = 4.6894e-4*N + 1.8494e6,
 *    reproduced term by term (weights, Adam state, gradients, optimizer intermediates,
 *    activations) so the phase logic yields exactly the blog's total.
 *
 * Moments of a step (enum gm_est_phase): the loss (end of forward and the loss's own
 * backward: every saved activation plus the loss's logits), the start of the layers'
 * backward (saved activations, one recomputed layer under checkpointing, the backward
 * temporaries of one layer), the end of backward (every gradient) and the optimizer step.
 *
 * Precision: fp32 keeps everything in fp32.  fp16-/bf16-mixed is torch autocast: the
 * parameters, gradients and optimizer state stay fp32 (the parameters are the fp32 master
 * weights), autocast keeps a 16-bit copy of every matmul weight from its use in the
 * forward until its backward, activations are 16-bit except norms, softmax and the
 * residual stream (fp32).  bf16 is pure bf16: weights, gradients, state and activations.
 * A frozen 16-bit base (LoRA, QLoRA without PEFT's fp32 upcast) carries a 16-bit residual
 * stream.
 *
 * The memory techniques (docs/estimate.md, "Memory techniques", gives each with its
 * source): the loss implementation (full HF logits, chunked, a fused cross-entropy kernel,
 * fused linear cross-entropy), checkpointing (full, every N-th layer, selective, op-level),
 * activation offloading, fused kernels, torch.compile, packed / padding-free batches
 * (tokens per micro-batch), the optimizer step in backward and paged optimizer state. */
#include "estimate/estimate_int.h"

#include <math.h>
#include <stdio.h>

bool est_eager_scores(const struct gm_job *job)
{
    return job->memory.attention == GM_ATTN_EAGER && job->memory.checkpointing != GM_CKPT_SELECTIVE;
}

double est_tokens(const struct gm_job *j)
{
    /* context parallelism: each rank holds seq / cp tokens of every sequence */
    double cp = j->parallel.cp > 1 ? (double)j->parallel.cp : 1.0;
    return j->workload.tokens ? (double)j->workload.tokens
                              : (double)j->workload.batch * (double)j->workload.seq / cp;
}

double est_act_elem_bytes(const struct gm_job *j)
{
    return j->numerics.precision == GM_PREC_FP32 ? 4.0 : 2.0;
}

bool est_torch_tp_plan(const struct gm_job *j)
{
    return j->parallel.tp > 1 && j->stack.framework != GM_FRAMEWORK_MEGATRON;
}

bool est_layer_checkpointed(const struct gm_job *j, uint64_t i)
{
    uint64_t k = j->memory.checkpoint_every ? j->memory.checkpoint_every : 1;
    return j->memory.checkpointing == GM_CKPT_FULL && i > 0 && i % k == 0;
}

uint64_t est_layers_checkpointed(const struct gm_job *j, uint64_t layers)
{
    uint64_t k = j->memory.checkpoint_every ? j->memory.checkpoint_every : 1;
    return j->memory.checkpointing == GM_CKPT_FULL ? layers / k : 0;
}

bool est_head_saves_input(const struct gm_job *j)
{
    return j->memory.adapter == GM_ADAPTER_NONE && j->memory.loss != GM_LOSS_FUSED_LINEAR;
}

/* An HF causal LM's forward computes the loss and keeps the final norm's output in its
 * `hidden_states` local (`hidden_states = outputs[0]`) while it projects and computes the loss,
 * and drops it when it returns: transformers 4.45 MistralForCausalLM.forward
 * (modeling_mistral.py at 005a187, a 4.45-era head; notes/lanes/foak.md), the inline forms
 * (hf_loss_forms below) alike, and from 4.46 through self.loss_function called in the same
 * forward (transformers PR #34283).  A frozen head saves nothing of it (MmBackward keeps
 * its input only for the weight's gradient), so it lives from the norm to the forward's
 * return: alive at the loss, gone before backward.  A version not given is a custom loop. */
bool est_forward_holds_head_input(const struct gm_job *j, const struct gm_model *m)
{
    return m && m->final_norm && !est_head_saves_input(j) && j->stack.transformers &&
           m->head == GM_HEAD_CAUSAL_LM &&
           (j->memory.loss == GM_LOSS_FULL || j->memory.loss == GM_LOSS_FUSED);
}

unsigned est_gradient_phases(const struct gm_job *j)
{
    if (j->memory.optimizer_in_backward)
        return GM_EST_PHASE_FORWARD_BACKWARD | GM_EST_PHASE_BACKWARD_END;
    return j->workload.grad_accum > 1 || j->numerics.zero_grad == GM_ZERO_GRAD_ZEROS
               ? GM_EST_PHASE_TRAIN_ALL
               : (GM_EST_PHASE_BACKWARD_END | GM_EST_PHASE_OPTIMIZER_STEP);
}

struct est_layer_cfg est_layer_cfg_full(double ea, double er, bool eager, uint64_t seq)
{
    struct est_layer_cfg c = {.ea = ea,
                              .er = er,
                              .eager = eager,
                              .seq = seq,
                              .norms_trainable = true,
                              .keeps_in = GM_LORA_ALL_LINEAR};
    return c;
}

double est_residual_bytes(const struct gm_job *j, const struct gm_model *m)
{
    enum gm_precision prec = j->numerics.precision;
    bool mixed = est_precision_autocast(prec);
    double er = prec == GM_PREC_BF16 ? 2.0 : 4.0;
    /* a frozen 16-bit base carries a 16-bit residual stream (no fp32 master weights feed
     * it); QLoRA's fp32 upcast of the non-NF4 parameters (PEFT) makes it fp32 */
    if (j->memory.adapter == GM_ADAPTER_LORA && prec != GM_PREC_FP32)
        er = 2.0;
    if (j->memory.adapter == GM_ADAPTER_QLORA && !j->memory.lora.fp32_upcast)
        er = 2.0;
    /* FSDP's MixedPrecision gathers 16-bit parameters: the forward runs in 16 bit, the
     * residual stream too (the fp32 master weights stay sharded) */
    if (j->parallel.shard == GM_SHARD_FSDP && mixed)
        er = 2.0;
    /* but bitsandbytes' Linear4bit returns its input's dtype (nn/modules.py
     * Linear4bit.forward, out.to(inp_dtype), 0.43.3): behind a LayerNorm, an fp32 op under
     * autocast, every QLoRA projection returns fp32, and so the residual stream is fp32
     * (behind HF's RMSNorm, whose output has the stream's dtype, it stays 16-bit) */
    if (j->memory.adapter == GM_ADAPTER_QLORA && mixed && m && m->norm == GM_NORM_LAYER)
        er = 4.0;
    return er;
}

/* What one norm saves for backward, its output excluded (the next matmul keeps that):
 * LayerNorm its input; HF's eager RMSNorm the fp32 copy of its input (the input itself in
 * an fp32 stream) and, with a trained weight, the normalised tensor; a fused RMSNorm its
 * input (and one rstd per token, not counted). */
static double norm_saved(const struct gm_model *m, const struct est_layer_cfg *c)
{
    double h = (double)m->hidden;
    if (m->norm != GM_NORM_RMS)
        return c->er * h;
    if (c->fused & GM_FUSED_RMS_NORM)
        return c->er * h;
    return 4.0 * h + (c->norms_trainable ? c->er * h : 0.0);
}

/* torchao Float8Linear (torchao/float8/float8_linear.py matmul_with_hp_or_float8_args, at
 * 7ca1bfb): the forward saves its high-precision input and weight for backward (so saved
 * activations do not change) and casts them to fp8 for the matmul; the backward casts the
 * output gradient to fp8 twice (for grad_input and for grad_weight), the weight and the
 * saved input again.  Bytes of those casts for the widest linear of a layer (gate/up: out I,
 * in h; o_proj and down: out h), alive beside the layer's other gradients over T tokens.
 * Attention scores, norms and the output projection (torchtitan's filter_fqns "output") stay
 * bf16. */
static double float8_backward_casts(const struct gm_model *m, double T)
{
    struct est_geom g;
    double h = (double)m->hidden, wide, narrow;
    est_geom(m, &g);
    wide = g.mlp_widest > g.q ? g.mlp_widest : g.q;
    /* out = wide, in = h (gate/up, q); out = h, in = wide (down, o_proj) */
    narrow = (2.0 * h + wide) * T + h * wide;
    wide = (2.0 * wide + h) * T + h * wide;
    return wide > narrow ? wide : narrow;
}

/* Eager attention whose softmax runs in the scores' dtype, not fp32: gpt-oss
 * (modeling_gpt_oss.py eager_attention_forward: F.softmax(..., dtype=combined_logits.dtype))
 * and Llama-4 ("llama4 doesn't cast attn weights to fp32", modeling_llama4.py). */
static bool softmax_in_compute_dtype(enum gm_arch a)
{
    return a == GM_ARCH_GPT_OSS || a == GM_ARCH_LLAMA4;
}

/* gpt-oss's experts in training (modeling_gpt_oss.py GptOssExperts, the self.training loop
 * over the experts hit): per token and chosen expert autograd keeps the gate_up output
 * (2 I, read by both clamps), the clamped gate, sigmoid(alpha gate), their product glu,
 * up + 1, the gated output for the down product (5 I more) and the expert's output for the
 * routing weight (h); the gathered input is the dispatched input counted with the router. */
static double gpt_oss_expert_saved(const struct gm_model *m, const struct est_geom *g, double ea)
{
    double k = m->n_experts ? (double)m->n_experts_active : 1.0;
    return ea * (7.0 * g->mlp + g->moe_share * k * (double)m->hidden);
}

/* A Mamba-2 mixer in training (mamba_split_conv1d_scan_combined, state-spaces/mamba
 * mamba_ssm/ops/triton/ssd_combined.py @d757aef, MambaSplitConv1dScanCombinedFn saves zxbcdt,
 * out_x and rstd): the in_proj output of d_inner gate + conv channels + one dt per head, the
 * scan's output of d_inner and an fp32 rstd per group of the gated norm; the in_proj input
 * is the block norm's output (Falcon-H1 scales it by ssm_in_multiplier first: a copy of h
 * of its own, as the attention's attention_in_multiplier copy). */
static double mamba2_saved(const struct gm_model *m, const struct est_layer_cfg *c)
{
    double di = (double)m->mamba_d_inner, nh = (double)m->mamba_heads;
    double conv = di + 2.0 * (double)m->mamba_groups * (double)m->mamba_d_state;
    double scaled = m->mix == GM_MIX_PARALLEL ? c->ea * (double)m->hidden : 0.0;
    return scaled + c->ea * (di + conv + nh) + c->ea * di + 4.0 * (double)m->mamba_groups;
}

/* Saved bytes per token of the average layer, from an attention part 'attn' (its norm
 * included), an MLP part 'mlp' and one block norm 'norm', as the model's layers mix them:
 * alternating layers each hold attention (or linear attention, taken as an attention layer's
 * when not Mamba-2) and an MLP; Falcon-H1's parallel layers hold attention, a Mamba-2 mixer
 * on the same normed input and an MLP; Nemotron-H's blocks one mixer each behind their own
 * norm. */
double est_layer_mix_saved(const struct gm_model *m, const struct est_layer_cfg *c, double attn,
                           double mlp, double norm)
{
    double L = (double)(m->n_layers ? m->n_layers : 1), ssm;
    if (!m->mamba_heads)
        return attn + mlp;
    ssm = mamba2_saved(m, c);
    if (m->mix == GM_MIX_PARALLEL)
        return attn + ssm + c->ea * (double)m->hidden + mlp;
    /* a pattern's attention and MLP blocks each have their own norm; alternating layers
     * have an MLP in every layer */
    if (m->mix == GM_MIX_PATTERN)
        return ((double)gm_model_attention_layers(m) * attn +
                (double)m->n_linear_layers * (norm + ssm) +
                (double)gm_model_mlp_layers(m) * (norm + mlp)) /
               L;
    return ((double)gm_model_attention_layers(m) * attn +
            (double)m->n_linear_layers * (norm + ssm)) /
               L +
           mlp;
}

double est_layer_saved_per_token(const struct gm_model *m, const struct est_layer_cfg *c,
                                 double *seq2)
{
    struct est_geom g;
    double h = (double)m->hidden, ea = c->ea;
    double drop_h = m->hidden_dropout > 0 ? h : 0.0;
    unsigned in = c->keeps_in;
    double q, kv, k_saved, v_saved, attn, mlp, expert, k, L, Ld, scores = 0;

    est_geom(m, &g); /* widths by layer kind: GQA, MLA, dense / expert MLPs (arch.c) */
    q = g.q;
    kv = g.k;
    /* eager GQA, and SDPA/flash fed by repeat_kv, save the repeated K/V */
    k_saved = ((c->eager || c->kv_repeated) && kv < q) ? q : kv;
    v_saved = ((c->eager || c->kv_repeated) && g.v < g.o_in) ? g.o_in : g.v;
    attn = norm_saved(m, c) + ((in & GM_LORA_QKV_IN) ? ea * h : 0.0);
    attn += ea * (q + k_saved + v_saved) + drop_h; /* q, k, v as attention keeps them */
    /* MLA: the low-rank latents are the inputs of the up-projections */
    if (in & GM_LORA_QKV_IN)
        attn += ea * g.latent;
    /* SDPA/flash keeps its output; eager attention's output is kept by o_proj only */
    if (!c->eager || (in & GM_LORA_O))
        attn += ea * g.o_in;
    if (m->qk_norm || m->qk_norm_full)
        attn += ((c->fused & GM_FUSED_RMS_NORM) ? ea : 4.0 + (c->norms_trainable ? ea : 0.0)) *
                (q + kv);
    if (c->eager && softmax_in_compute_dtype(m->arch)) {
        /* gpt-oss and Llama-4 take the softmax in the scores' own dtype: its output (gpt-oss:
         * over the scores and the sink column, the sink sliced off as a view) is what the PV
         * product keeps; no fp32 copy */
        double drop = m->attn_dropout > 0 ? 1.0 : 0.0;
        scores = (double)m->n_heads * ((double)c->seq + (m->attn_sinks ? 1.0 : 0.0)) * (ea + drop);
        attn += scores;
    } else if (c->eager) {
        /* fp32 softmax output; its 16-bit (or dropped-out) copy for the PV product; mask;
         * soft-capping (gemma-2) keeps the tanh output too */
        double drop = m->attn_dropout > 0 ? 1.0 : 0.0;
        double copy = (ea != 4.0 || drop > 0) ? ea : 0.0;
        double cap = m->attn_softcap > 0 ? ea : 0.0;
        scores = (double)m->n_heads * (double)c->seq * (4.0 + drop + copy + cap);
        attn += scores;
    } else {
        attn += (double)m->n_heads * 4.0; /* logsumexp per head */
    }

    mlp = drop_h;
    if (m->norms_per_layer >= 2)
        mlp += norm_saved(m, c) + ((in & (GM_LORA_GATE | GM_LORA_UP)) ? ea * h : 0.0);
    /* g.mlp is the width run per token: dense, or top-k + shared experts */
    if (m->arch == GM_ARCH_GPT_OSS) /* clamped SwiGLU: see gpt_oss_expert_saved() */
        expert = gpt_oss_expert_saved(m, &g, ea);
    else if (m->gated_mlp) /* gate (for act), act(gate) and up (for the product), the product */
        expert = ea * g.mlp * ((c->fused & GM_FUSED_SWIGLU) ? 2.0 : 3.0) +
                 ((in & GM_LORA_DOWN) ? ea * g.mlp : 0.0);
    else /* up (for act), act (for down), the Python gelu_new formula's intermediates
          * (transformers' NewGELUActivation; LitGPT's GptNeoxMLP runs one F.gelu op) */
        expert = ea * g.mlp * (1.0 + (m->act == GM_ACT_GELU_NEW && !c->one_op_gelu ? 3.0 : 0.0)) +
                 ((in & GM_LORA_DOWN) ? ea * g.mlp : 0.0);
    mlp += expert;
    k = m->n_experts ? (double)m->n_experts_active : 1.0;
    if (m->n_experts) /* dispatched inputs, router, in the layers with experts */
        mlp += g.moe_share * (k * ea * h + 8.0 * (double)m->n_experts);
    if (m->norms_per_layer > 2) /* Gemma-2/3's norms on the branch outputs */
        mlp += (double)(m->norms_per_layer - 2) * norm_saved(m, c);
    if (m->head != GM_HEAD_SEQ2SEQ_LM) {
        if (seq2)
            *seq2 = scores;
        return est_layer_mix_saved(m, c, attn, mlp, norm_saved(m, c));
    }
    /* encoder-decoder: the encoder's layers over the source (seq tokens), the decoder's over
     * the target (r = target / seq of them), each with a self-attention (scores over the
     * target), a cross-attention (queries per target token, scores over the source, keys and
     * values from the source's tokens) and one norm more; per source token, averaged over
     * both stacks */
    L = (double)m->n_layers;
    Ld = (double)m->n_decoder_layers;
    {
        double r = c->target && c->seq ? (double)c->target / (double)c->seq : 1.0;
        double kv_part = ea * (k_saved + v_saved);
        double self = attn - scores + r * scores; /* per target token */
        double cross = attn - kv_part;            /* queries, output, source scores */
        double dec = r * (self + cross + mlp + norm_saved(m, c)) + kv_part;
        if (seq2)
            *seq2 = (L * scores + Ld * r * (r * scores + scores)) / (L + Ld);
        return (L * (attn + mlp) + Ld * dec) / (L + Ld);
    }
}

double est_layer_op_saved_per_token(const struct gm_model *m, const struct est_layer_cfg *c)
{
    /* matmul output widths in forward order (torchtitan's Llama block: wq, wk, wv, wo, w1,
     * w3, w2); the policy keeps the 1st, 3rd, 5th, ... and recomputes the others.  Widths
     * per token averaged over the layers (arch.c): the MLP's is the top-k experts' in a
     * layer with experts, whose down projections each write a hidden-wide output. */
    struct est_geom g;
    double h = (double)m->hidden, k = m->n_experts ? (double)m->n_experts_active : 1.0;
    double widths[7], kept = 0;
    size_t n = 0;
    est_geom(m, &g);
    widths[n++] = g.q;
    widths[n++] = g.k;
    widths[n++] = g.v;
    widths[n++] = h;
    if (m->gated_mlp)
        widths[n++] = g.mlp;
    widths[n++] = g.mlp;
    widths[n++] = h * (1.0 + g.moe_share * (k - 1.0));
    for (size_t i = 0; i < n; i += 2)
        kept += widths[i];
    /* the block input (checkpoint frame), attention output and logsumexp, unless the
     * attention's op is not one the policy saves (recomputed with the block in backward) */
    if (c->sac_attn_recomputed)
        return c->er * h + c->ea * kept;
    return c->er * h + c->ea * (kept + g.o_in) + 4.0 * (double)m->n_heads;
}

double est_layer_backward_per_token(const struct gm_model *m, const struct est_layer_cfg *c,
                                    double *seq2)
{
    struct est_geom g;
    double h = (double)m->hidden, ea = c->ea;
    double mlp, attn, scores = 0;
    double width;
    est_geom(m, &g);
    /* MLP (the widest layer's: dense or top-k + shared): the product's gradient, then those
     * of act(gate) and up side by side (a fused SwiGLU writes them into its saved inputs);
     * attention: dq, dk, dv beside the output's gradient, and eager attention's score
     * gradients.  HF's MoE blocks loop over the experts (MixtralSparseMoeBlock.forward: each
     * expert on the tokens routed to it), so in backward one expert's intermediates' gradients
     * exist at a time, over its share of the tokens (k / E of them, balanced routing), or the
     * shared expert's over all of them. */
    width = g.mlp_max;
    if (c->expert_loop && m->n_experts && m->n_experts_active) {
        double Ie = (double)(m->moe_intermediate ? m->moe_intermediate : m->intermediate);
        double routed = Ie * (double)m->n_experts_active / (double)m->n_experts;
        double shared = (double)m->shared_intermediate + (double)m->n_shared_experts * Ie;
        width = routed > shared ? routed : shared;
        if (m->n_dense_layers && (double)m->intermediate > width)
            width = (double)m->intermediate;
    }
    if (m->gated_mlp)
        mlp = ea * width * ((c->fused & GM_FUSED_SWIGLU) ? 1.0 : 3.0);
    else
        mlp = ea * width * 2.0;
    if (c->eager)
        scores = (double)m->n_heads * (double)c->seq * (4.0 + ea);
    attn = ea * (g.q + g.o_in + g.k + g.v) + scores + c->ring_bwd;
    if (seq2)
        *seq2 = mlp > attn ? 0.0 : scores;
    /* the gradient of the residual stream flows beside them */
    return c->er * h + (mlp > attn ? mlp : attn);
}

static const char *mib(char *b, size_t n, uint64_t bytes)
{
    snprintf(b, n, "%.1f MiB", (double)bytes / (double)GM_MIB);
    return b;
}

static enum gm_status train_blog(const struct gm_job *j, struct gm_estimate *e,
                                 struct gm_error *err)
{
    const struct gm_job_numerics *nu = &j->numerics;
    bool full = j->memory.checkpointing == GM_CKPT_FULL;
    double N = (double)e->n_params;
    double P = est_act_elem_bytes(j); /* the blog formula's one element size, weights too */
    double A = nu->activations_per_token > 0 ? nu->activations_per_token : 4.6894e-4 * N + 1.8494e6;
    double acts = A * (double)j->workload.batch * (double)j->workload.seq * P;
    uint64_t np = est_round(N * P);
    char note[GM_EST_NOTE_MAX];
    enum gm_status st;

    if (full)
        acts /= 5.0;
    e->activations_per_token = A;
    snprintf(note, sizeof(note), "N*P = %llu x %g", (unsigned long long)e->n_params, P);
    st = est_add(e, GM_KIND_WEIGHTS, "weights", np, GM_EST_PHASE_TRAIN_ALL, false,
                 GM_EXTENT_ALL_LAYERS, note, err);
    if (st == GM_OK)
        st = est_add(e, GM_KIND_OPTIMIZER_STATE, "optimizer_state", est_round(2 * N * P),
                     GM_EST_PHASE_TRAIN_ALL, false, GM_EXTENT_ALL_LAYERS, "2*N*P (AdamW moments)",
                     err);
    if (st == GM_OK)
        st = est_add(e, GM_KIND_GRADIENTS, "gradients", np,
                     j->workload.grad_accum > 1
                         ? GM_EST_PHASE_TRAIN_ALL
                         : GM_EST_PHASE_BACKWARD_END | GM_EST_PHASE_OPTIMIZER_STEP,
                     false, GM_EXTENT_ALL_LAYERS, "N*P", err);
    if (st == GM_OK)
        st = est_add(e, GM_KIND_OPTIMIZER_TEMP, "optimizer_intermediates", np,
                     GM_EST_PHASE_OPTIMIZER_STEP, true, GM_EXTENT_ALL_LAYERS, "N*P", err);
    snprintf(note, sizeof(note), "A*B*L*P = %.1f x %llu x %llu x %g%s", A,
             (unsigned long long)j->workload.batch, (unsigned long long)j->workload.seq, P,
             full ? " / 5 (checkpointing)" : "");
    if (st == GM_OK)
        st = est_add(e, GM_KIND_ACTIVATIONS, "activations", est_round(acts),
                     GM_EST_PHASE_FORWARD_BACKWARD, true, GM_EXTENT_ALL_LAYERS, note, err);
    if (st != GM_OK)
        return st;
    est_assume(e, "method blog (HF blog 'Visualize and understand GPU memory in "
                  "PyTorch'): total = N*P + 2NP + max(2NP, A*B*L*P)");
    if (nu->activations_per_token > 0)
        est_assume(e, "A = %.1f activations per token, given", A);
    else
        est_assume(e,
                   "A = 4.6894e-4*N + 1.8494e6 = %.1f activations per token "
                   "(the blog's linear fit across LLMs)",
                   A);
    est_assume(e,
               "P = %g bytes for weights, AdamW state, gradients and activations "
               "alike; no fp32 master copy, no logits term",
               P);
    if (full)
        est_assume(e, "gradient checkpointing divides activations by 5 (the blog's "
                      "companion app)");
    if (nu->optimizer != GM_OPT_ADAMW && nu->optimizer != GM_OPT_ADAM)
        est_assume(e,
                   "the blog formula assumes AdamW; --optimizer %s is ignored by "
                   "this method",
                   gm_optimizer_name(nu->optimizer));
    return GM_OK;
}

/* Optimizer state bytes per parameter element, and a description.  A paged optimizer is
 * bitsandbytes' (PagedAdamW, PagedAdamW8bit, PagedLion): its 32-bit state is fp32 whatever
 * the parameters' dtype. */
static double state_bytes(const struct gm_job *j, double ew, const struct gm_param_counts *pc,
                          uint64_t n, const char **what)
{
    const struct gm_job_numerics *nu = &j->numerics;
    bool paged = j->memory.paged_optimizer;
    switch (nu->optimizer) {
    case GM_OPT_ADAMW:
    case GM_OPT_ADAM:
        *what = paged ? "two fp32 moments (bitsandbytes 32-bit paged state)"
                      : "two moments (exp_avg, exp_avg_sq) in the parameter dtype";
        return 2.0 * (paged ? 4.0 : ew) * (double)n;
    case GM_OPT_SGD:
        *what = "none";
        return 0;
    case GM_OPT_SGD_MOMENTUM:
    case GM_OPT_LION:
        *what = paged ? "one fp32 momentum buffer (bitsandbytes 32-bit paged state)"
                      : "one momentum buffer in the parameter dtype";
        return (paged ? 4.0 : ew) * (double)n;
    case GM_OPT_ADAMW_8BIT:
        /* bitsandbytes quantises the moments blockwise: 256 elements per block since 0.44
         * (aa57bd89), 2048 before */
        if (j->stack.bitsandbytes && j->stack.bitsandbytes < GM_VERSION(0, 44, 0)) {
            *what = "two 8-bit moments + one fp32 absmax per 2048-element block each";
            return (2.0 + 8.0 / 2048.0) * (double)n;
        }
        *what = "two 8-bit moments + one fp32 absmax per 256-element block each";
        return (2.0 + 8.0 / 256.0) * (double)n;
    case GM_OPT_ADAFACTOR:
        *what = "factored second moment (rows + cols per matrix), no first moment";
        return ew * (double)pc->factored_state;
    case GM_OPT__COUNT:
        break;
    }
    *what = "?";
    return 0;
}

/* Temporaries of the optimizer step over 'n' parameters whose largest tensor has
 * 'largest' elements. */
static double step_temporaries(const struct gm_job *j, double ew, uint64_t n, uint64_t largest,
                               const char **what)
{
    const struct gm_job_numerics *nu = &j->numerics;
    if (j->memory.paged_optimizer) {
        *what = "bitsandbytes kernels update in place: none";
        return 0;
    }
    switch (nu->optimizer) {
    case GM_OPT_ADAMW:
    case GM_OPT_ADAM:
        if (nu->optim_impl == GM_OPTIM_FOREACH) {
            *what = j->memory.optimizer_in_backward
                        ? "foreach over one parameter at a time: sqrt(exp_avg_sq) of the largest"
                        : "foreach: sqrt(exp_avg_sq) for all parameters at once (1x params)";
            return ew * (double)n;
        }
        if (nu->optim_impl == GM_OPTIM_FUSED) {
            *what = "fused kernel: none";
            return 0;
        }
        *what = "per-parameter loop: 2 temporaries of the largest tensor";
        return 2.0 * ew * (double)largest;
    case GM_OPT_SGD:
    case GM_OPT_SGD_MOMENTUM:
        *what = "in-place updates (no weight decay): none";
        return 0;
    case GM_OPT_LION:
        *what = "per-parameter loop: 2 temporaries of the largest tensor";
        return 2.0 * ew * (double)largest;
    case GM_OPT_ADAMW_8BIT:
        *what = "bitsandbytes kernels update in place: none";
        return 0;
    case GM_OPT_ADAFACTOR:
        *what = "per-parameter loop: fp32 update and squared gradient of the largest tensor";
        return 2.0 * 4.0 * (double)largest;
    case GM_OPT__COUNT:
        break;
    }
    *what = "?";
    return 0;
}

/* ---- the loss ---- */

/* transformers 4.46 to 4.48 shift the fp32 logits with .contiguous() in ForCausalLMLoss
 * (PR #35646 removed the copy); before 4.46 the model upcasts and the loss copies the
 * shifted slice; later versions shift the labels. */
static bool hf_loss_copies_logits(const struct gm_job *j)
{
    uint32_t v = j->stack.transformers;
    return v >= GM_VERSION(4, 46, 0) && v < GM_VERSION(4, 49, 0);
}

/* GPTBigCode's rewrite (transformers 4.54): from it the model neither computes its own loss
 * nor returns its key/value in training. */
#define GPT_BIGCODE_REWRITE GM_VERSION(4, 54, 0)

/* What each causal LM's Hugging Face class did for its loss before it called
 * self.loss_function (ForCausalLMLoss), and until which release (exclusive).
 *
 * EST_HF_LOSS_UPCAST: the forward upcasts the logits (logits = logits.float()) and shifts an
 * fp32 copy, logits[..., :-1, :].contiguous(), for nn.CrossEntropyLoss: LlamaForCausalLM
 * and the classes copied from it (modeling_llama.py at 4.45.2; Gemma-2 soft-caps first).
 * EST_HF_LOSS_INLINE: nn.CrossEntropyLoss on the shifted .contiguous() copy of the
 * compute-dtype logits, no .float(): GPT2LMHeadModel (modeling_gpt2.py), GPTNeoXForCausalLM
 * (modeling_gpt_neox.py), FalconForCausalLM (modeling_falcon.py) before their move to
 * self.loss_function (transformers PR #34283, 4.46); GPTBigCodeForCausalLM
 * (modeling_gpt_bigcode.py, read at 0057454) until its rewrite.
 * A model given by numbers (GM_ARCH_UNKNOWN) is taken as a Llama-style class.  Architectures
 * that were not in transformers before 4.46 have no entry (docs/estimate.md, the loss). */
static const struct {
    enum gm_arch arch;
    enum est_hf_loss form;
    uint32_t until;
} hf_loss_forms[] = {
    {GM_ARCH_UNKNOWN, EST_HF_LOSS_UPCAST, GM_VERSION(4, 46, 0)},
    {GM_ARCH_LLAMA, EST_HF_LOSS_UPCAST, GM_VERSION(4, 46, 0)},
    {GM_ARCH_MISTRAL, EST_HF_LOSS_UPCAST, GM_VERSION(4, 46, 0)},
    {GM_ARCH_MIXTRAL, EST_HF_LOSS_UPCAST, GM_VERSION(4, 46, 0)},
    {GM_ARCH_QWEN2, EST_HF_LOSS_UPCAST, GM_VERSION(4, 46, 0)},
    {GM_ARCH_QWEN2_MOE, EST_HF_LOSS_UPCAST, GM_VERSION(4, 46, 0)},
    {GM_ARCH_GEMMA, EST_HF_LOSS_UPCAST, GM_VERSION(4, 46, 0)},
    {GM_ARCH_GEMMA2, EST_HF_LOSS_UPCAST, GM_VERSION(4, 46, 0)},
    {GM_ARCH_PHI, EST_HF_LOSS_UPCAST, GM_VERSION(4, 46, 0)},
    {GM_ARCH_PHI3, EST_HF_LOSS_UPCAST, GM_VERSION(4, 46, 0)},
    {GM_ARCH_COHERE, EST_HF_LOSS_UPCAST, GM_VERSION(4, 46, 0)},
    {GM_ARCH_STARCODER2, EST_HF_LOSS_UPCAST, GM_VERSION(4, 46, 0)},
    {GM_ARCH_OLMO, EST_HF_LOSS_UPCAST, GM_VERSION(4, 46, 0)},
    {GM_ARCH_GPT2, EST_HF_LOSS_INLINE, GM_VERSION(4, 46, 0)},
    {GM_ARCH_GPT_NEOX, EST_HF_LOSS_INLINE, GM_VERSION(4, 46, 0)},
    {GM_ARCH_FALCON, EST_HF_LOSS_INLINE, GM_VERSION(4, 46, 0)},
    {GM_ARCH_GPT_BIGCODE, EST_HF_LOSS_INLINE, GPT_BIGCODE_REWRITE},
};

enum est_hf_loss est_hf_loss_form(const struct gm_job *j, const struct gm_model *m)
{
    uint32_t v = j->stack.transformers;
    if (!v || m->head != GM_HEAD_CAUSAL_LM)
        return EST_HF_LOSS_FUNCTION;
    for (size_t i = 0; i < sizeof hf_loss_forms / sizeof hf_loss_forms[0]; i++)
        if (hf_loss_forms[i].arch == m->arch)
            return v < hf_loss_forms[i].until ? hf_loss_forms[i].form : EST_HF_LOSS_FUNCTION;
    return EST_HF_LOSS_FUNCTION;
}

/* The transformers releases whose SDPA and flash attention classes expand K/V with
 * repeat_kv before the kernel (exclusive bound: 4.48.0 moved them to the shared attention
 * functions, integrations/flash_attention.py passing K/V as they are).  MistralFlashAttention2
 * and MistralSdpaAttention call repeat_kv(key_states, self.num_key_value_groups) before
 * _flash_attention_forward / scaled_dot_product_attention (modeling_mistral.py, read at
 * 005a187e, the 4.45 line; Mistral is in transformers since 4.34); MixtralFlashAttention2 is
 * "Copied from ...MistralFlashAttention2 with Mistral->Mixtral".  LlamaFlashAttention2 of the
 * same releases passes the KV heads as they are; Llama's SDPA class repeats, which the one
 * sdpa/flash setting cannot tell apart, so it has no entry (docs/estimate.md). */
#define HF_ATTN_REFACTOR GM_VERSION(4, 48, 0)

bool est_hf_repeats_kv(const struct gm_job *j, const struct gm_model *m)
{
    uint32_t v = j->stack.transformers;
    return m && v && v < HF_ATTN_REFACTOR && j->stack.model_impl == GM_MODEL_IMPL_HF &&
           (m->arch == GM_ARCH_MISTRAL || m->arch == GM_ARCH_MIXTRAL) && m->n_kv_heads &&
           m->n_kv_heads < m->n_heads;
}

/* Whether the model returns every layer's key/value in training: GPTBigCodeModel (before its
 * rewrite) sets use_cache from config.use_cache and has no guard against it under gradient
 * checkpointing, and its 'present' is a view of c_attn's output, so that whole q + 2 kv wide
 * output of every layer stays alive in the outputs until the Trainer drops them after the
 * loss. */
static bool hf_returns_kv_in_training(const struct gm_job *j, const struct gm_model *m)
{
    uint32_t v = j->stack.transformers;
    return m->arch == GM_ARCH_GPT_BIGCODE && v && v < GPT_BIGCODE_REWRITE && !m->use_cache_off;
}

/* Whether the step runs as the HF Trainer does under mixed precision: since transformers
 * 4.30 (PR #23148) through accelerate's prepare_model, whose forward returns an fp32 copy of
 * every 16-bit output (accelerate utils/operations.py convert_to_fp32, since c8c9314f; read
 * at v1.0.1): the logits' copy lives beside what the loss keeps until the Trainer drops the
 * outputs before backward.  A version not given is a custom loop (torch.autocast alone). */
bool est_hf_trainer_fp32_outputs(const struct gm_job *j)
{
    return est_precision_autocast(j->numerics.precision) &&
           j->stack.transformers >= GM_VERSION(4, 30, 0);
}

/* torchtune's compile flag compiles its loss (training/_compile.py compile_loss, v0.3.0
 * 651a730 to v0.6.1 a6290a5; the newest preset row is v0.6.1): each chunk's loss of
 * CEWithChunkedOutputLoss, any other loss whole.  Later,
 * LinearCrossEntropyLoss.apply_compile_strategy logs "Skipping compile loss" (pytorch/torchtune
 * ff7fe87), and no other stack compiles a chunked loss. */
static bool torchtune_compiles_loss(const struct gm_job *j)
{
    uint32_t v = j->stack.preset_version;
    return j->memory.compile && j->stack.preset == GM_STACK_TORCHTUNE &&
           (!v || (v >= GM_VERSION(0, 3, 0) && v < GM_VERSION(0, 7, 0)));
}

static bool torchtune_compiled_chunks(const struct gm_job *j)
{
    return j->memory.loss == GM_LOSS_CHUNKED && torchtune_compiles_loss(j);
}

struct loss_model {
    double bytes;   /* at the loss moment */
    double grad;    /* of which gradients of the logits (the loss's backward) */
    bool fp32_copy; /* the Trainer's fp32 copy of the logits decides the figure */
    char note[GM_EST_NOTE_MAX];
    const char *what; /* the assumption */
};

/* A compiled cross-entropy over T tokens' nv logits in C chunks (1: the whole logits at once):
 * the 16-bit logits kept by the compiled graph, a log-sum-exp per token, and one chunk's new
 * 16-bit gradient; 'extra' what the form keeps beside them (a soft-cap's output). */
static void compiled_ce(double ea, double nv, double T, double C, double extra,
                        struct loss_model *out)
{
    out->bytes = ea * nv * (1.0 + 1.0 / C) + 4.0 * T + extra;
    out->grad = ea * nv / C;
}

/* Bytes of the loss over T tokens at its own moment (the end of forward and the loss's
 * backward), for the job's implementation. */
static void loss_bytes(const struct gm_job *j, const struct gm_model *m, double T, double ea,
                       double ew, struct loss_model *out)
{
    bool mixed = est_precision_autocast(j->numerics.precision);
    double V = (double)m->vocab, h = (double)m->hidden, nv = T * V;
    double C = (double)j->memory.loss_chunks;
    /* final logit soft-capping (Gemma-2): the model's forward divides the lm_head output,
     * takes tanh and scales it back (transformers Gemma2ForCausalLM.forward); tanh saves its
     * result for its backward (tanh_backward(grad, result), pytorch
     * tools/autograd/derivatives.yaml at d327a78), so one B*L*V tensor of the compute dtype
     * lives beside the capped logits whatever loss takes them (full, plain, fused, compiled:
     * a compiled head still saves that tensor or the lm_head output it is recomputed from).
     * The forms that project the hidden states themselves cap inside: chunked (torchtune's
     * Gemma2FinalNorm caps the final norm's output, B*L*h, not the logits), fused-linear
     * (Liger's and CCE's kernels cap in registers; unsloth's chunk keeps one capped chunk),
     * chunked-backward (nothing caps) */
    double cap = m->final_softcap > 0 ? ea * nv : 0.0;
    bool head_trained = j->memory.adapter == GM_ADAPTER_NONE,
         inline_ce =
             est_hf_loss_form(j, m) == EST_HF_LOSS_INLINE || j->memory.loss == GM_LOSS_PLAIN;
    bool fp32_out = est_hf_trainer_fp32_outputs(j) && ea != 4.0;
    out->grad = 0;
    out->fp32_copy = false;
    switch (j->memory.loss) {
    case GM_LOSS_PLAIN: /* the model's own inline form, written in the training loop */
    case GM_LOSS_FULL:
        if (m->head == GM_HEAD_SEQ2SEQ_LM && j->memory.loss == GM_LOSS_FULL) {
            /* T5ForConditionalGeneration / BartForConditionalGeneration: CrossEntropyLoss on
             * the lm_logits against the labels themselves (the decoder input is shifted, not
             * the logits): no shifted copy, no upcast of their own; under autocast
             * cross_entropy's fp32 cast and fp32 log-softmax */
            double per = mixed ? ea + 8.0 : 2.0 * ea;
            out->bytes = per * nv + cap;
            out->grad = (mixed ? 8.0 : 2.0 * ea) * nv;
            snprintf(out->note, sizeof out->note,
                     "B*T*V x %g B over the target tokens: logits, %slog-softmax", per,
                     mixed ? "autocast's fp32 cast, fp32 " : "");
            out->what = "seq2seq loss over the B*T target tokens: the model's CrossEntropyLoss "
                        "on its lm_logits and the labels (no shift, no upcast of its own)";
            return;
        }
        if (inline_ce) {
            /* forward: the logits, their shifted .contiguous() copy, the log-softmax (saved);
             * backward: the log-softmax, its gradient and the copy's, then the slice's.  Under
             * autocast cross_entropy is an fp32 op: the copy is cast to fp32 first and the
             * log-softmax and its gradients are fp32 */
            double per = mixed ? 2.0 * ea + 8.0 : 3.0 * ea;
            out->bytes = per * nv + cap;
            /* at its backward: the log-softmax's gradient and the copy's beside what is kept */
            out->grad = (mixed ? 4.0 + ea : 2.0 * ea) * nv;
            snprintf(out->note, sizeof out->note,
                     "B*L*V x %g B: logits, their shifted copy, %slog-softmax", per,
                     mixed ? "autocast's fp32 cast, fp32 " : "");
            out->what =
                j->memory.loss == GM_LOSS_PLAIN
                    ? "loss over all B*L positions: the training loop's F.cross_entropy on the "
                      "shifted copy of the compute-dtype logits, no fp32 upcast (autocast's "
                      "fp32 cast under mixed precision: cross_entropy is on its fp32 list)"
                    : "loss over all B*L positions in the model's own nn.CrossEntropyLoss on "
                      "the compute-dtype logits, no fp32 upcast (GPT-2, GPT-NeoX, Falcon before "
                      "transformers 4.46; GPTBigCode before 4.54)";
        } else if (hf_loss_copies_logits(j) && ea != 4.0) {
            out->bytes = 14.0 * nv + cap;
            snprintf(out->note, sizeof out->note,
                     "B*L*V x 14 B: logits, fp32 upcast, its shifted copy, fp32 log-softmax");
            out->what = "loss over all B*L positions, HF ForCausalLMLoss of transformers "
                        "4.46-4.48: fp32 upcast and a shifted copy of the logits";
        } else if (est_torch_tp_plan(j)) {
            /* vocabulary-sharded logits under torch's loss_parallel (torchtitan's default
             * with TP; every TP job but Megatron's is taken to shard the vocabulary this way,
             * HF's TP plan gathering the whole vocabulary is not modelled): cross_entropy on the
             * local fp32 shard dispatches to torch/distributed/tensor/parallel/loss.py.
             * _log_softmax, unfused: the fp32 input, x - max and exp() of it beside the logits,
             * then the saved result (14 B at the forward's end); _nll_loss_and_log_softmax_backward
             * on the saved log-softmax x: zeros_like(x), exp(x), their sum, the sum times the
             * gradient, the last two beside x and the zeros: 16 B at the loss's backward */
            out->bytes = 16.0 * nv + cap;
            out->grad = 12.0 * nv;
            snprintf(out->note, sizeof out->note,
                     "B*L*V/t x 16 B: loss_parallel's fp32 log-softmax kept, zeros, exp and "
                     "their sum, the input's gradient");
            out->what = "loss over all B*L positions on the vocabulary-sharded logits, torch's "
                        "loss_parallel (tensor/parallel/loss.py): log-softmax and its backward "
                        "unfused in fp32";
        } else {
            /* the log-softmax's gradient and the input's beside the kept log-softmax */
            out->bytes = 12.0 * nv + cap;
            out->grad = 8.0 * nv;
            snprintf(out->note, sizeof out->note,
                     "B*L*V x 12 B: fp32 log-softmax kept, its gradient and the input's (%s)",
                     ea != 4.0 ? "forward: logits, fp32 upcast, log-softmax" : "fp32 logits");
            out->what = "loss over all B*L positions, logits upcast to fp32 (HF ForCausalLMLoss); "
                        "--loss chunked, fused or fused-linear keeps less";
        }
        return;
    case GM_LOSS_CHUNKED:
        if (torchtune_compiled_chunks(j)) {
            /* torchtune's compile flag compiles each chunk's upcast and cross-entropy
             * (training/_compile.py compile_loss: loss.compute_cross_entropy =
             * torch.compile(...), v0.3.0 651a730 to v0.6.1 a6290a5): as under --loss
             * compiled, Inductor keeps each
             * chunk's 16-bit logits as the saved input with a log-sum-exp per token, no fp32
             * log-softmax, and a chunk's backward writes a new 16-bit gradient beside them.
             * Autograd runs every chunk's loss backward before the projections' (they were
             * recorded last: engine.cpp's ready queue takes the highest sequence number), each
             * releasing its saved chunk as its gradient is made, so the logits and their
             * gradients together stay one chunk above the logits */
            compiled_ce(ea, nv, T, C, cap > 0 ? ea * T * h : 0, out);
            snprintf(out->note, sizeof out->note,
                     "%g compiled chunks: every chunk's 16-bit logits kept, one chunk's new "
                     "gradient",
                     C);
            out->what = "chunked cross-entropy, each chunk's loss compiled (torchtune "
                        "compile_loss): the 16-bit logits kept, no fp32 copies";
            return;
        }
        /* every chunk's fp32 log-softmax is kept; one chunk's logits, upcast and gradients
         * exist at a time (torchtune LinearCrossEntropyLoss) */
        out->bytes = 4.0 * nv + (ea != 4.0 ? 8.0 + ea : 8.0) * nv / C + (cap > 0 ? ea * T * h : 0);
        out->grad = 4.0 * nv / C;
        snprintf(out->note, sizeof out->note,
                 "%g chunks: log-softmax of every chunk kept, one chunk's logits and gradients", C);
        out->what = j->memory.compile
                        ? "chunked cross-entropy (torchtune LinearCrossEntropyLoss): the "
                          "projection and the loss one chunk at a time, the loss not compiled "
                          "(only torchtune 0.3 to 0.6's compile_loss compiles the chunks: "
                          "--stack torchtune@0.4)"
                        : "chunked cross-entropy (torchtune LinearCrossEntropyLoss): the "
                          "projection and the loss one chunk at a time";
        return;
    case GM_LOSS_FUSED: {
        /* the kernel replaces the log-softmax and writes the gradient into its input.  On an
         * HF model it runs inside the model's loss, after that loss's fp32 upcast and (4.46 to
         * 4.48) its shifted fp32 copy (before 4.46 the model upcasts and shifts):
         * fms-acceleration's FastForCausalLMLoss (FOAK, 24bdadb) is ForCausalLMLoss with the
         * kernel, as Liger's patch of cross_entropy is.
         * A model's own loss (EST_HF_LOSS_INLINE) gets the kernel on its 16-bit shifted
         * copy; a custom loop calls it on the logits themselves.  'kept' is what stays after the
         * forward: the logits returned and the kernel's input. */
        double per, kept;
        const char *held;
        bool hf = j->stack.transformers != 0 && !inline_ce;
        if (inline_ce) {
            per = kept = 2.0 * ea;
            held = "the logits and their shifted copy, the gradient written into the copy";
        } else if (est_hf_loss_form(j, m) == EST_HF_LOSS_UPCAST) {
            /* the model upcasts (its 16-bit logits are freed) and shifts a copy */
            per = kept = 8.0;
            fp32_out = false; /* the logits it returns are fp32 already */
            held = "the model's fp32 logits and their shifted copy, the gradient written into "
                   "the copy";
        } else if (hf && hf_loss_copies_logits(j)) {
            per = ea + (ea != 4.0 ? 4.0 : 0.0) + 4.0;
            kept = ea + 4.0;
            held = "the logits, the loss's fp32 upcast and its shifted copy, the gradient "
                   "written into the copy";
        } else if (hf) {
            per = kept = ea + (ea != 4.0 ? 4.0 : 0.0);
            held = "the logits and the loss's fp32 upcast, the gradient written into it";
        } else {
            per = kept = ea;
            held = "the logits; the kernel writes their gradient in place";
        }
        if (fp32_out && kept + 4.0 > per) {
            per = kept + 4.0;
            out->fp32_copy = true;
            held = inline_ce ? "the logits, their shifted copy (the kernel's input) and the "
                               "Trainer's fp32 copy of the logits"
                             : "the logits, the kernel's fp32 input and the Trainer's fp32 "
                               "copy of the logits";
        }
        out->bytes = per * nv + 4.0 * T + cap;
        snprintf(out->note, sizeof out->note, "B*L*V x %g B: %s%s", per, held,
                 cap > 0 ? "; the soft-cap's tanh output" : "");
        out->what = inline_ce ? "cross-entropy kernel in place of the model's own "
                                "nn.CrossEntropyLoss, on its 16-bit shifted copy of the logits"
                    : hf      ? "cross-entropy kernel inside HF's loss (Liger / unsloth as FOAK "
                                "patches it), after the loss's fp32 upcast of the logits"
                              : "cross-entropy kernel on the 16-bit logits (Liger / unsloth): "
                                "no fp32 copies, the gradient written into the logits";
        return;
    }
    case GM_LOSS_FUSED_LINEAR: {
        double grads = ea * T * h + (head_trained ? ew * V * h : 0.0);
        if (j->memory.loss_impl == GM_LOSS_IMPL_CCE) {
            /* Cut Cross-Entropy (apple/ml-cross-entropy cce_lse_forward.py, cce_backward.py
             * at 18e76ad): the forward keeps the fp32 log-sum-exp of each row; the backward
             * recomputes the logits in on-chip blocks and writes the input's and the
             * classifier's gradients (zeros_like, in their dtypes) */
            out->bytes = grads + 4.0 * T;
            snprintf(out->note, sizeof out->note,
                     "fp32 log-sum-exp per token, input gradient%s; logits only on chip",
                     head_trained ? ", lm_head gradient" : "");
            out->what = "fused linear cross-entropy (Cut Cross-Entropy): the logits are "
                        "computed in on-chip blocks, never in device memory";
            return;
        }
        if (j->memory.loss_impl == GM_LOSS_IMPL_UNSLOTH) {
            /* unsloth_zoo fused_losses/cross_entropy_loss.py (ce232d6): get_chunk_size splits
             * the tokens into ceil(T x V x 4 B / target / 4) x 4 chunks (one when the fp32
             * logits fit the target), target min(half the free memory, 4 GiB), taken as 4
             * GiB; each chunk's lm_head product, its .float() copy for F.cross_entropy, the
             * log-softmax and its gradient (torch.func.grad_and_value), the input's gradient
             * (empty_like) and the head's (zeros_like) written as the chunks go.  A model's
             * logit_softcapping caps each chunk's logits there (compute_fused_ce_loss: divide,
             * tanh, multiply), tanh's result kept for the chunk's backward: one more 16-bit
             * chunk.  (A later unsloth-zoo, 002a0c9, sizes its chunks another way; this is
             * ce232d6 throughout.) */
            double exact = T * V * 4.0 / (4.0 * 1073741824.0);
            double n = exact <= 1.0 ? 1.0 : ceil(exact / 4.0) * 4.0, rows = ceil(T / n);
            out->bytes = grads + rows * V * (ea + 12.0 + (cap > 0 ? ea : 0.0));
            snprintf(out->note, sizeof out->note,
                     "input gradient%s and one of %.0f chunks of %.0f rows (logits, fp32 copy, "
                     "log-softmax, gradient)",
                     head_trained ? ", lm_head gradient" : "", n, rows);
            out->what = "fused linear cross-entropy (unsloth): chunks of at most 4 GiB of fp32 "
                        "logits, each with its gradient at once";
            return;
        }
        if (j->memory.loss_impl == GM_LOSS_IMPL_CUTILE) {
            /* TileGym's cuTile fused_linear_cross_entropy (NVIDIA/TileGym
             * src/tilegym/ops/cutile/fused_linear_cross_entropy.py at d966a0a, _chunked_fwd
             * and ChunkedLinearCrossEntropyFunction): the rows padded to a multiple of 8 (a
             * padded copy of the input when they are not), one logits buffer of chunk_size
             * (4096) x V rows whatever the row count, reused by every chunk and kept for the
             * backward (its last chunk's gradient is a view of it), the input's gradient
             * (empty_like), an fp32 loss per row, and with more than one chunk an fp32 dW
             * accumulator and a 16-bit dW buffer for each chunk's product, made whether the
             * head is trained or not */
            double rows = ceil(T / 8.0) * 8.0, n = ceil(rows / 4096.0);
            double input = ea * rows * h * (rows > T ? 2.0 : 1.0);
            double dw = n > 1.0 ? (4.0 + ea) * V * h : 0.0;
            out->bytes = input + dw + ea * 4096.0 * V + 4.0 * rows;
            snprintf(out->note, sizeof out->note, "input gradient, one 4096-row logits buffer%s",
                     n > 1.0 ? ", fp32 and 16-bit lm_head gradient buffers" : "");
            out->what = "fused linear cross-entropy (cuTile, TileGym): 4096-row chunks through "
                        "one logits buffer, the head's gradient accumulated in fp32";
            return;
        }
        /* Liger: chunk = next power of two of ceil(T / ceil(V / h)) rows; the gradients
         * of the input (and of the lm_head weight when trained) are computed in forward */
        double inc = ceil(V / (h > 0 ? h : 1.0)), rows = ceil(T / (inc > 0 ? inc : 1.0));
        double chunk = pow(2.0, ceil(log2(rows > 1 ? rows : 1.0)));
        if (chunk > T)
            chunk = T;
        out->bytes = grads + ea * chunk * (V + h);
        snprintf(out->note, sizeof out->note,
                 "input gradient%s and one %.0f-row chunk of logits; no B*L*V tensor",
                 head_trained ? ", lm_head gradient" : "", chunk);
        out->what = "fused linear cross-entropy (Liger): the logits are never materialised "
                    "beyond one chunk of rows";
        return;
    }
    case GM_LOSS_CHUNKED_BACKWARD: {
        /* torchtitan ChunkedCELoss (components/loss.py, f90c845): the hidden states are
         * split into C detached .contiguous() chunks (a copy of all of them), each chunk
         * runs lm_head, cross_entropy on its .float() logits and its own backward at once:
         * one chunk's logits (held by the loop), the fp32 log-softmax kept, its gradient
         * and the fp32 input's gradient at a time (the .float() copy is freed once the
         * log-softmax has it), the
         * chunk's input gradient appended to a list and concatenated at the end (two
         * copies of the hidden states' gradient), and the head's weight gradient taken
         * per chunk before any layer's backward */
        double rows = nv / C, per = ea + 12.0;
        out->bytes = 3.0 * ea * T * h + (head_trained ? ew * V * h : 0.0) + per * rows;
        out->grad = 8.0 * rows;
        snprintf(out->note, sizeof out->note,
                 "%g chunks, each with its backward at once: hidden copies and gradients, "
                 "one chunk x %g B per logit%s",
                 C, per, head_trained ? ", lm_head gradient" : "");
        out->what = "chunked loss with a backward per chunk (torchtitan ChunkedCELoss): "
                    "no B*L*V tensor, the head's gradient before the layers' backward";
        return;
    }
    case GM_LOSS_COMPILED:
        /* F.cross_entropy(pred.flatten(0, 1).float(), labels) under torch.compile (torchtitan
         * components/loss.py build_cross_entropy_loss: torch.compile(loss_fn) under
         * --training.compile, read at 775a486, e7c0cae, 2c8b594 and 6fc499f): Inductor fuses
         * the fp32 upcast and the log-softmax into reductions over the 16-bit logits, which
         * the compiled graph keeps as its saved input, with a log-sum-exp per token, after the
         * loop drops its own reference (train.py: del pred before loss.backward()).  Its
         * backward writes the gradient into a new 16-bit tensor: AOTAutograd lets Inductor
         * reuse ("donate") only saved tensors that alias no forward input or output
         * (torch/_functorch/_aot_autograd/jit_compile_runtime_wrappers.py
         * collect_fw_donated_buffer_idxs, pytorch c5336df), and the logits are the graph's
         * input.  A fused kernel writes that gradient into the logits instead. */
        compiled_ce(ea, nv, T, 1.0, cap, out);
        snprintf(out->note, sizeof out->note,
                 "B*L*V x %g B: the logits kept by the compiled loss and their new gradient%s",
                 2.0 * ea, cap > 0 ? "; the soft-cap's tanh output" : "");
        out->what = "compiled cross-entropy (torch.compile of F.cross_entropy on the upcast "
                    "logits): no fp32 copies, the logits kept by the compiled graph and a new "
                    "16-bit gradient";
        return;
    case GM_LOSS__COUNT:
        break;
    }
    out->bytes = 0;
    out->what = "?";
}

/* ---- the layers ---- */

/* The layer configuration of the job: dtypes, what is trained, which kernels. */
static struct est_layer_cfg job_layer_cfg(struct est_ctx *cx, double ea, double er)
{
    const struct gm_job *j = cx->job;
    struct est_layer_cfg c = est_layer_cfg_full(ea, er, est_eager_scores(j), j->workload.seq);
    const struct gm_job_lora *lo = &j->memory.lora;
    c.fused = j->memory.fused_kernels;
    if (cx->m && cx->m->head == GM_HEAD_SEQ2SEQ_LM)
        c.target = j->workload.target_seq;
    c.one_op_gelu = j->stack.model_impl == GM_MODEL_IMPL_LITGPT;
    c.kv_repeated = est_hf_repeats_kv(j, cx->m);
    c.sac_attn_recomputed = est_titan_sac_recomputes_attention(j);
    /* an HF model's code (the version given) runs its experts one after another */
    c.expert_loop = j->stack.transformers != 0;
    /* torch.compile: pointwise chains recomputed by the partitioner, as the fused kernels
     * do (an approximation: the high end of the range is the eager layer) */
    if (j->memory.compile && est_uncertain(cx, GM_UNCERTAIN_APPROX, false, 1.0, 1.0, 0.0) > 0.5)
        c.fused |= GM_FUSED_RMS_NORM | GM_FUSED_SWIGLU;
    if (j->memory.adapter != GM_ADAPTER_NONE) {
        /* frozen base: its matmuls keep no input; an adapter reading the same tensor (no
         * dropout, same dtype) keeps it, otherwise the adapter keeps its own copy
         * (stage_adapters.c) */
        double ad = (double)est_adapter_bytes(j);
        c.norms_trainable = false;
        c.keeps_in = (lo->dropout > 0 || ad != ea) ? 0 : lo->targets;
        /* bitsandbytes before 0.43.2 (PR #1270): MatMul4Bit kept its input A whether or not
         * the weight needed a gradient */
        if (j->memory.adapter == GM_ADAPTER_QLORA && j->stack.bitsandbytes &&
            j->stack.bitsandbytes < GM_VERSION(0, 43, 2))
            c.keeps_in = GM_LORA_ALL_LINEAR;
    }
    return c;
}

/* The saved activations under the job's checkpointing and offloading. */
struct saved_model {
    double saved;          /* on the device from forward to backward */
    double recompute;      /* one layer rebuilt during its backward (checkpointing) */
    double host;           /* offloaded to host memory */
    double saved_seq2;     /* of 'saved', the s x s scores (they grow with batch x seq^2) */
    double recompute_seq2; /* of 'recompute', the same */
    char note[GM_EST_NOTE_MAX];
};

static void saved_activations(struct est_ctx *cx, const struct gm_model *m,
                              const struct est_layer_cfg *c, double T, struct saved_model *out)
{
    const struct gm_job *j = cx->job;
    double L = (double)est_total_layers(m), As, A = est_layer_saved_per_token(m, c, &As) * T;
    double in = c->er * (double)m->hidden * T, per_layer_kept = A, n_ck = 0;
    char b1[32];
    As *= T; /* the s x s part of A */
    out->recompute = 0;
    out->recompute_seq2 = 0;
    out->host = 0;
    switch (j->memory.checkpointing) {
    case GM_CKPT_FULL:
        n_ck = (double)est_layers_checkpointed(j, (uint64_t)L);
        out->saved = (L - n_ck) * A + n_ck * in;
        out->saved_seq2 = (L - n_ck) * As;
        out->recompute = n_ck > 0 ? A : 0;
        out->recompute_seq2 = n_ck > 0 ? As : 0;
        per_layer_kept = in;
        if (j->memory.checkpoint_every > 1)
            snprintf(out->note, sizeof out->note,
                     "%.0f of %.0f layers checkpointed (every %llu-th): their inputs, the others' "
                     "%.0f B/token",
                     n_ck, L, (unsigned long long)j->memory.checkpoint_every, A / T);
        else
            snprintf(out->note, sizeof out->note, "checkpointed: %.0f layer inputs x %g B x h", L,
                     c->er);
        break;
    case GM_CKPT_OP: {
        double kept = est_layer_op_saved_per_token(m, c) * T;
        if (kept > A)
            kept = A;
        out->saved = L * kept;
        out->saved_seq2 = 0; /* the policy keeps no s x s tensor */
        out->recompute = A - kept;
        out->recompute_seq2 = As < out->recompute ? As : out->recompute;
        per_layer_kept = kept;
        snprintf(out->note, sizeof out->note,
                 "op-level SAC: %.0f layers x %.0f B/token (input, every other matmul output, "
                 "attention output)",
                 L, kept / T);
        break;
    }
    default:
        out->saved = L * A;
        out->saved_seq2 = L * As;
        snprintf(out->note, sizeof out->note, "%.0f layers x %.0f bytes/token x %.0f tokens (%s)",
                 L, A / T, T, c->eager ? "eager attention" : "sdpa");
        break;
    }
    if (j->memory.activation_offload && L > 0) {
        /* torchtune OffloadActivations: every saved tensor goes to pinned host memory; a
         * few stay in flight (up to 5 in forward, the layer being restored in backward) */
        double flight = est_uncertain(cx, GM_UNCERTAIN_APPROX, false, 2.0, 1.0, L < 5 ? L : 5.0);
        double gpu = (flight < L ? flight : L) * per_layer_kept;
        if (gpu > out->saved)
            gpu = out->saved;
        /* the layers in flight keep their share of the scores */
        out->saved_seq2 = out->saved > 0 ? out->saved_seq2 * gpu / out->saved : 0;
        out->host = out->saved - gpu;
        out->saved = gpu;
        snprintf(out->note, sizeof out->note,
                 "offloaded to host memory: %.0f layers' saved tensors in flight (%s on the host)",
                 flight, mib(b1, sizeof b1, est_round(out->host)));
    }
}

static enum gm_status train_arch(struct est_ctx *cx, struct gm_error *err)
{
    const struct gm_job *j = cx->job;
    const struct gm_model *m = cx->m;
    const struct gm_param_counts *pc = &cx->pc;
    struct gm_estimate *e = cx->e;
    const struct gm_job_numerics *nu = &j->numerics;
    enum gm_precision prec = nu->precision;
    bool mixed = est_precision_autocast(prec);
    bool zeros = nu->zero_grad == GM_ZERO_GRAD_ZEROS;
    bool in_bwd = j->memory.optimizer_in_backward;
    double ew = prec == GM_PREC_BF16 ? 2.0 : 4.0;
    double ea = est_act_elem_bytes(j);
    double er = est_residual_bytes(j, m);
    uint64_t n = e->n_params, seq = j->workload.seq;
    uint64_t largest = pc->largest_tensor ? pc->largest_tensor : n;
    double T, state, temps, final_norm, emb, bwd, bwd_seq2;
    struct est_layer_cfg lc;
    struct saved_model sv;
    struct loss_model lm;
    const char *state_what, *temp_what;
    char note[GM_EST_NOTE_MAX];
    enum gm_status st;

    /* a sequence length not given is an assumption the output names, not a range: the
     * verdict is about the job as stated (packed batches give their tokens) */
    if (!j->workload.tokens && !est_given(j, EST_SET_SEQ))
        est_length_assumed(cx, "sequence length", seq, "--seq");
    T = est_tokens(j);
    cx->tokens = T;
    lc = job_layer_cfg(cx, ea, er);
    lc.seq = seq;
    if (seq > m->max_positions && m->max_positions)
        est_assume(e, "seq %llu exceeds the model's max_position_embeddings %llu",
                   (unsigned long long)seq, (unsigned long long)m->max_positions);
    snprintf(note, sizeof(note), "%llu parameters x %g bytes%s", (unsigned long long)n, ew,
             mixed ? " (fp32 master weights; autocast computes in 16-bit)" : "");
    st = est_add(e, mixed ? GM_KIND_MASTER_WEIGHTS : GM_KIND_WEIGHTS,
                 mixed ? "weights_fp32_master" : "weights", est_round(ew * (double)n),
                 GM_EST_PHASE_TRAIN_ALL, false, GM_EXTENT_ALL_LAYERS, note, err);
    if (st != GM_OK)
        return st;
    if (mixed) {
        snprintf(note, sizeof(note),
                 "%llu matmul weights x 2 bytes, cast by autocast and "
                 "saved for backward",
                 (unsigned long long)pc->matmul);
        st = est_add(e, GM_KIND_WEIGHT_COPIES, "weights_16bit_autocast_copies",
                     est_round(2.0 * (double)pc->matmul), GM_EST_PHASE_SAVED, true,
                     GM_EXTENT_ALL_LAYERS, note, err);
        if (st != GM_OK)
            return st;
    }
    if (in_bwd)
        snprintf(note, sizeof(note),
                 "optimizer in backward: two gradients of the largest tensor (%llu) at a time",
                 (unsigned long long)largest);
    else
        snprintf(note, sizeof(note), "%llu x %g bytes, %s", (unsigned long long)n, ew,
                 zeros ? "kept between steps (zero_grad to zeros)"
                       : "freed by zero_grad(set_to_none)");
    st = est_add(e, GM_KIND_GRADIENTS, "gradients",
                 est_round(ew * (double)(in_bwd ? 2 * (largest < n ? largest : n) : n)),
                 est_gradient_phases(j), false, in_bwd ? GM_EXTENT_ONE_LAYER : GM_EXTENT_ALL_LAYERS,
                 note, err);
    if (st != GM_OK)
        return st;
    state = state_bytes(j, ew, pc, n, &state_what);
    if (state > 0 && j->memory.paged_optimizer) {
        /* bitsandbytes pages the state of tensors of 1e5 elements or more with
         * cudaMallocManaged: on the device, outside the caching allocator; the small
         * tensors' (norms) state is ordinary CUDA memory */
        double small = n ? state * (double)pc->norms / (double)n : 0;
        st = est_add(e, GM_KIND_MANAGED, "optimizer_state_paged", est_round(state - small),
                     GM_EST_PHASE_TRAIN_ALL, false, GM_EXTENT_ALL_LAYERS,
                     "cudaMallocManaged: on the device, not in max_memory_allocated", err);
        if (st == GM_OK && small > 0)
            st = est_add(e, GM_KIND_OPTIMIZER_STATE, "optimizer_state", est_round(small),
                         GM_EST_PHASE_TRAIN_ALL, false, GM_EXTENT_ALL_LAYERS,
                         "state of tensors under 1e5 elements (not paged)", err);
        if (st != GM_OK)
            return st;
    } else if (state > 0) {
        st = est_add(e, GM_KIND_OPTIMIZER_STATE, "optimizer_state", est_round(state),
                     GM_EST_PHASE_TRAIN_ALL, false, GM_EXTENT_ALL_LAYERS, state_what, err);
        if (st != GM_OK)
            return st;
    }
    temps = step_temporaries(j, ew, in_bwd ? (largest < n ? largest : n) : n, largest, &temp_what);
    if (temps > 0) {
        st = est_add(e, GM_KIND_OPTIMIZER_TEMP, "optimizer_step_temporaries", est_round(temps),
                     in_bwd ? (GM_EST_PHASE_FORWARD_BACKWARD | GM_EST_PHASE_BACKWARD_END)
                            : GM_EST_PHASE_OPTIMIZER_STEP,
                     true, in_bwd ? GM_EXTENT_ONE_LAYER : GM_EXTENT_ALL_LAYERS, temp_what, err);
        if (st != GM_OK)
            return st;
    }

    /* Saved activations, and one layer rebuilt during its backward under checkpointing. */
    saved_activations(cx, m, &lc, T, &sv);
    st = est_add(e, GM_KIND_ACTIVATIONS, "activations", est_round(sv.saved), GM_EST_PHASE_SAVED,
                 true, GM_EXTENT_ALL_LAYERS, sv.note, err);
    if (st != GM_OK)
        return st;
    est_set_parts(e, sv.saved_seq2, 0);
    if (sv.recompute > 0) {
        st = est_add(e, GM_KIND_ACTIVATIONS, "recomputed_layer", est_round(sv.recompute),
                     GM_EST_PHASE_FORWARD_BACKWARD, true, GM_EXTENT_ONE_LAYER,
                     "one layer's saved tensors rebuilt during its backward", err);
        if (st != GM_OK)
            return st;
        est_set_parts(e, sv.recompute_seq2, 0);
    }
    cx->host_activation_bytes = sv.host;

    /* Inputs and the embedding output's extras: kept until the embedding's backward, the
     * last of the step. */
    emb = T * 8.0;
    if (m->emb_norm || m->hidden_dropout > 0)
        emb += T * (double)m->hidden * (1.0 + (m->emb_norm ? er + ea : 0.0));
    st = est_add(e, GM_KIND_ACTIVATIONS, "embeddings", est_round(emb), GM_EST_PHASE_SAVED, true,
                 GM_EXTENT_ENDS, "token ids (int64), embedding norm/dropout", err);
    if (st != GM_OK)
        return st;
    /* The final norm's saved tensors (and its output, kept by a trained lm_head for the
     * weight's gradient) belong to the loss moment only: autograd runs the head's and the
     * final norm's nodes right after the loss's and releases each node's saved tensors once
     * it has run (torch/csrc/autograd/engine.cpp Engine::evaluate_function,
     * fn.release_variables() unless retain_graph, PyTorch v2.4.1), before any decoder
     * layer's backward. */
    final_norm = m->final_norm
                     ? norm_saved(m, &lc) + (est_head_saves_input(j) ? ea * (double)m->hidden : 0.0)
                     : 0.0;
    if (final_norm > 0) {
        st = est_add(e, GM_KIND_ACTIVATIONS, "final_norm", est_round(T * final_norm),
                     GM_EST_PHASE_LOSS, true, GM_EXTENT_HEAD,
                     "the final norm's saved tensors, released by its backward before the "
                     "layers'",
                     err);
        if (st != GM_OK)
            return st;
    }
    if (est_forward_holds_head_input(j, m)) {
        st = est_add(e, GM_KIND_ACTIVATIONS, "final_norm_output",
                     est_round(T * ea * (double)m->hidden), GM_EST_PHASE_LOSS, true, GM_EXTENT_HEAD,
                     "the final norm's output (the head's input), held by the model's forward "
                     "until it returns with the loss",
                     err);
        if (st != GM_OK)
            return st;
        est_set_forward_local(e);
    }

    /* The loss at its own moment (an encoder-decoder's over its target tokens). */
    lm.what = NULL;
    lm.fp32_copy = false;
    if (m->head != GM_HEAD_ENCODER) {
        double Tl = m->head == GM_HEAD_SEQ2SEQ_LM && j->workload.target_seq && seq
                        ? T * (double)j->workload.target_seq / (double)seq
                        : T;
        loss_bytes(j, m, Tl, ea, ew, &lm);
        e->loss_tokens = est_round(Tl);
        e->loss_vocab = m->vocab;
        st = est_add(e, GM_KIND_LOGITS, "logits_and_loss", est_round(lm.bytes), GM_EST_PHASE_LOSS,
                     true, GM_EXTENT_HEAD, lm.note, err);
        if (st != GM_OK)
            return st;
        est_set_parts(e, 0, lm.grad);
    }
    /* Each layer's key/value returned by the model (a view of the fused projection's
     * output), in the dtype that projection returns (QLoRA's in the stream's). */
    if (hf_returns_kv_in_training(j, m)) {
        struct est_geom g;
        double ob = j->memory.adapter == GM_ADAPTER_QLORA ? er : ea;
        est_geom(m, &g);
        snprintf(note, sizeof(note),
                 "%llu layers' c_attn outputs (%.0f wide x %g B) held by the returned "
                 "past_key_values until the loss",
                 (unsigned long long)est_total_layers(m), g.q + g.k + g.v, ob);
        st = est_add(e, GM_KIND_KV_CACHE, "returned_kv_cache",
                     est_round((double)est_total_layers(m) * (g.q + g.k + g.v) * ob * T),
                     GM_EST_PHASE_LOSS, true, GM_EXTENT_ALL_LAYERS, note, err);
        if (st != GM_OK)
            return st;
    }
    /* The gradients of one layer's activations during its backward (selective
     * checkpointing recomputes the eager scores there: their gradients remain). */
    lc.eager = j->memory.attention == GM_ATTN_EAGER;
    lc.ring_bwd = est_ring_attention_per_token(j, m, true);
    bwd = est_layer_backward_per_token(m, &lc, &bwd_seq2) * T;
    if (j->memory.float8)
        bwd += float8_backward_casts(m, T);
    st = est_add(e, GM_KIND_BACKWARD_TEMP, "backward_transients", est_round(bwd),
                 GM_EST_PHASE_FORWARD_BACKWARD, true, GM_EXTENT_ONE_LAYER,
                 "gradients of one layer's activations during its backward", err);
    if (st != GM_OK)
        return st;
    est_set_parts(e, bwd_seq2 * T, 0);

    /* Assumptions, in the order a reader checks them.  With adapters, the adapter stage
     * says what is trained and in which precision. */
    if (j->memory.adapter == GM_ADAPTER_NONE)
        est_assume(e, "precision %s: %s", gm_precision_name(prec),
                   mixed ? "torch autocast; fp32 parameters (master), gradients and "
                           "optimizer state; 16-bit matmul copies and activations"
                   : prec == GM_PREC_FP32
                       ? "everything fp32"
                       : "pure bf16 parameters, gradients, optimizer state and activations");
    if (j->gpu.sm && j->gpu.sm < 80 && prec == GM_PREC_FP16_MIXED &&
        !est_given(j, EST_SET_PRECISION))
        est_assume(e,
                   "precision fp16-mixed by default: the %s (sm %u.%u) has no bf16, which needs "
                   "sm 8.0 (Ampere); autocast in fp16 with a gradient scaler, the same bytes",
                   j->gpu.label, j->gpu.sm / 10, j->gpu.sm % 10);
    else if (j->gpu.sm && j->gpu.sm < 80 &&
             (prec == GM_PREC_BF16_MIXED || prec == GM_PREC_BF16 ||
              j->memory.adapter == GM_ADAPTER_QLORA))
        est_assume(e,
                   "warning: bf16 needs sm 8.0 (Ampere); the %s (sm %u.%u) has none "
                   "(torch.cuda.is_bf16_supported() is false): use fp16 there",
                   j->gpu.label, j->gpu.sm / 10, j->gpu.sm % 10);
    est_assume(e, "optimizer %s: %s; step temporaries: %s", gm_optimizer_name(nu->optimizer),
               state_what, temp_what);
    if (j->workload.tokens)
        est_assume(e,
                   "packed / padding-free micro-batch of %llu tokens (sequences up to %llu): "
                   "every per-token term scales with the tokens, not batch x seq",
                   (unsigned long long)j->workload.tokens, (unsigned long long)seq);
    else if (m->head == GM_HEAD_SEQ2SEQ_LM)
        est_assume(e,
                   "activations per layer from the architecture (attention: %s%s), "
                   "batch %llu x source %llu / target %llu tokens (encoder over the source, "
                   "decoder over the target with cross-attention to the source)",
                   lc.eager ? "eager, s*s scores saved" : "sdpa/flash, no s*s scores",
                   j->memory.checkpointing == GM_CKPT_FULL ? ", full checkpointing" : "",
                   (unsigned long long)j->workload.batch, (unsigned long long)seq,
                   (unsigned long long)(j->workload.target_seq ? j->workload.target_seq : seq));
    else
        est_assume(e,
                   "activations per layer from the architecture (attention: %s%s), "
                   "batch %llu x seq %llu",
                   lc.eager ? "eager, s*s scores saved" : "sdpa/flash, no s*s scores",
                   j->memory.checkpointing == GM_CKPT_FULL ? ", full checkpointing" : "",
                   (unsigned long long)j->workload.batch, (unsigned long long)seq);
    if (lc.eager && gm_arch_hf_eager(m->arch) && !est_given(j, EST_SET_ATTENTION))
        est_assume(e,
                   "attention eager by default: the transformers %s class has no SDPA or flash "
                   "path (%s)",
                   gm_arch_name(m->arch),
                   m->arch == GM_ARCH_T5 ? "T5Attention adds its relative position bias to the "
                                           "materialised scores"
                                         : "_supports_sdpa = False; the sinks join the scores");
    if (lm.what)
        est_assume(e, "%s", lm.what);
    if (torchtune_compiles_loss(j) && j->memory.loss == GM_LOSS_FULL)
        est_assume(e, "torchtune compiles the whole loss on fp32 logits (_compile.py compile_loss "
                      "else branch): sized uncompiled, maybe above what Inductor keeps");
    if (lc.kv_repeated && !lc.eager)
        est_assume(e,
                   "transformers before 4.48: the %s SDPA/flash class expands K/V from %llu to "
                   "%llu heads (repeat_kv) before the kernel, which saves the expanded copies",
                   gm_arch_name(m->arch), (unsigned long long)m->n_kv_heads,
                   (unsigned long long)m->n_heads);
    if (hf_returns_kv_in_training(j, m))
        est_assume(e, "GPTBigCode before transformers 4.54 keeps config.use_cache in training: "
                      "each layer's key/value (a view of its c_attn output) is returned and held "
                      "until the loss");
    if (lm.fp32_copy)
        est_assume(e, "HF Trainer under mixed precision (accelerate, transformers >= 4.30): the "
                      "forward returns an fp32 copy of the logits, alive until before backward");
    est_assume(e, "gradients %s",
               in_bwd  ? "stepped and freed one parameter at a time during backward (optimizer "
                         "in backward): no optimizer-step phase"
               : zeros ? "kept between steps (zero_grad to zeros), so "
                         "they coexist with activations"
                       : "freed by zero_grad(set_to_none=True) (PyTorch "
                         ">= 2.0), allocated during backward");
    if (est_torch_before_2(j))
        est_assume(e,
                   "PyTorch %u.%u (--torch-version): before 2.0 torch.optim steps with a for-loop "
                   "unless foreach or fused is given, and zero_grad() zeroes the gradients "
                   "(set_to_none=False)",
                   (unsigned)(j->stack.torch >> 16), (unsigned)((j->stack.torch >> 8) & 255));
    bool fused_lora = est_fused_lora_runs(j, GM_LORA_Q) || est_fused_lora_runs(j, GM_LORA_O);
    if ((j->memory.fused_kernels & ~(unsigned)GM_FUSED_LORA) || fused_lora)
        est_assume(e, "fused kernels:%s%s%s%s (Liger-Kernel / unsloth): they save less per layer",
                   (j->memory.fused_kernels & GM_FUSED_RMS_NORM) ? " RMSNorm" : "",
                   (j->memory.fused_kernels & GM_FUSED_SWIGLU) ? " SwiGLU" : "",
                   (j->memory.fused_kernels & GM_FUSED_ROPE) ? " RoPE (forward temporaries only)"
                                                             : "",
                   fused_lora ? " LoRA (the adapters keep only their dropped-out input)" : "");
    if (j->memory.compile)
        est_assume(e, "torch.compile of the decoder layers (approximation): the min-cut "
                      "partitioner recomputes pointwise chains (norm copies, activations), never "
                      "matmuls; the loss stays as --loss says");
    if (m->n_linear_layers && !m->mamba_heads)
        est_assume(e,
                   "approximation: the %llu linear-attention (%s) layers' saved tensors are "
                   "taken as an attention layer's (no s*s scores either way)",
                   (unsigned long long)m->n_linear_layers, est_linear_kind(m));
    else if (m->n_linear_layers)
        est_assume(e,
                   "%llu Mamba-2 mixers save their in_proj output, the scan output and the "
                   "gated norm's rstd (mamba_split_conv1d_scan_combined)%s",
                   (unsigned long long)m->n_linear_layers,
                   m->mix == GM_MIX_PARALLEL ? ", beside each layer's attention and MLP (Falcon-H1)"
                   : m->mix == GM_MIX_PATTERN
                       ? "; Nemotron-H's attention and MLP blocks hold one mixer each"
                       : "");
    if (j->memory.float8)
        est_assume(e, "Float8 training (torchao Float8Linear, tensorwise): each linear saves its "
                      "bf16 input and weight for backward and casts them to fp8 per matmul, so "
                      "saved activations stay bf16; the backward's fp8 casts (output gradient "
                      "twice, weight, input) add to its transients; attention, norms and the "
                      "output projection stay bf16; weights are gathered in bf16 (no FSDP float8 "
                      "all-gather)");
    if (j->memory.checkpointing == GM_CKPT_OP && est_titan_sac_recomputes_attention(j))
        est_assume(e, "op-level SAC (torchtitan 0.1-0.2.0): every other matmul output and the "
                      "layer input kept; attention recomputed (cuDNN SDPA first on sm >= 100, "
                      "not in the save list)");
    else if (j->memory.checkpointing == GM_CKPT_OP)
        est_assume(e, "op-level selective checkpointing (torchtitan SelectiveAC): every other "
                      "matmul output, the attention output and the layer input kept");
    if (j->memory.activation_offload)
        est_assume(e, "activation offloading (torchtune OffloadActivations): saved tensors in "
                      "pinned host memory, a few in flight on the device; the loss stays");
    return GM_OK;
}

enum gm_status est_stage_train(struct est_ctx *cx, struct gm_error *err)
{
    const struct gm_job *j = cx->job;
    enum gm_status st;
    if (j->mode != GM_EST_TRAIN)
        return GM_OK;
    if (j->method == GM_METHOD_BLOG) {
        st = train_blog(j, cx->e, err);
    } else {
        if (!cx->m)
            return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                           "training estimate needs a model for per-layer activations (give "
                           "MODEL, or use --method blog with --parameters)");
        if (cx->m->head == GM_HEAD_ENCODER && j->memory.loss != GM_LOSS_FULL)
            return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                           "--loss applies to models with a language-model head (an encoder "
                           "has no vocabulary head)");
        st = train_arch(cx, err);
        /* PyTorch's cuBLAS workspaces (the blog method is the blog's formula, as printed) */
        if (st == GM_OK)
            st = est_add_torch_workspaces(cx, err);
    }
    if (st != GM_OK)
        return st;
    if (j->memory.checkpointing == GM_CKPT_SELECTIVE)
        est_assume(cx->e, "selective activation recomputation: the attention core "
                          "(s x s scores, softmax, dropout) is recomputed, the rest "
                          "kept (Korthikanti et al. 2022)");
    if (j->workload.grad_accum > 1)
        est_assume(cx->e,
                   "gradient accumulation over %llu micro-batches: activations "
                   "are those of one micro-batch; the gradients stay allocated "
                   "through the next micro-batches' forward passes",
                   (unsigned long long)j->workload.grad_accum);
    est_stack_assume(cx);
    return GM_OK;
}
