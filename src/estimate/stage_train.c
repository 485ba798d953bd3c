/* SPDX-License-Identifier: MIT */
/* stage_train.c - the training stage: memory of one training step: weights, gradients,
 * optimizer state, step temporaries, saved activations, logits and loss.
 *
 * Two methods:
 *  - arch (default): per-tensor accounting from the architecture.  Saved activations
 *    follow Korthikanti et al. 2022 (sbh(34 + 5as/h) per layer for 16-bit GPT layers),
 *    re-derived per tensor for the real layer layout: gated MLPs keep four I-wide tensors,
 *    rotary embeddings keep the pre-rotation q/k and their rotate_half copies, eager
 *    attention with GQA saves the repeated K/V, RMSNorm keeps an fp32 copy, dropout keeps a
 *    1-byte mask; SDPA/flash keeps no s*s scores.  The logits of a causal LM are kept in the
 *    compute dtype, upcast to fp32 for the loss, and the log-softmax output is fp32; the
 *    loss backward adds the fp32 gradient of the logits.
 *  - blog: the HF blog formula N*P + 2NP + max(2NP, A*B*L*P), A = 4.6894e-4*N + 1.8494e6,
 *    reproduced term by term (weights, Adam state, gradients, optimizer intermediates,
 *    activations) so the phase logic yields exactly the blog's total.
 *
 * Precision: fp32 keeps everything in fp32.  fp16-/bf16-mixed is torch autocast: the
 * parameters, gradients and optimizer state stay fp32 (the parameters are the fp32 master
 * weights), autocast keeps a 16-bit copy of every matmul weight from its use in the
 * forward until its backward, activations are 16-bit except norms, softmax and the
 * residual stream (fp32).  bf16 is pure bf16: weights, gradients, state and activations.
 *
 * Gradients are released by zero_grad(set_to_none) between steps; with gradient
 * accumulation (or zero_grad to zeros) they stay allocated through the next forward
 * passes.  Selective checkpointing recomputes exactly the attention core's s x s tensors:
 * what SDPA/flash attention never stores. */
#include "estimate/estimate_int.h"

#include <math.h>
#include <stdio.h>

bool est_eager_scores(const struct gm_job *job)
{
    return job->memory.attention == GM_ATTN_EAGER && job->memory.checkpointing != GM_CKPT_SELECTIVE;
}

/* Gradients live from the end of backward through the step, or throughout when they are
 * kept between steps or accumulated over micro-batches. */
static unsigned gradient_phases(const struct gm_job *j)
{
    return j->workload.grad_accum > 1 || j->numerics.zero_grad == GM_ZERO_GRAD_ZEROS
               ? GM_EST_PHASE_TRAIN_ALL
               : (GM_EST_PHASE_BACKWARD_END | GM_EST_PHASE_OPTIMIZER_STEP);
}

double est_layer_saved_per_token(const struct gm_model *m, double ea, double er, bool eager,
                                 uint64_t seq)
{
    struct est_geom g;
    double h = (double)m->hidden;
    double q, kv, I;
    bool rotary = est_rotary(m);
    double rms = m->norm == GM_NORM_RMS ? 4.0 * h : 0.0;
    double norm_one = er * h + rms + ea * h; /* input, fp32 copy (RMS), output */
    double drop_h = m->hidden_dropout > 0 ? h : 0.0;
    double kv_saved, v_saved;
    double attn, mlp, expert, k, L, Ld;

    est_geom(m, &g); /* widths by layer kind: GQA, MLA, dense / expert MLPs (arch.c) */
    q = g.q;
    kv = g.k;
    I = g.mlp;
    kv_saved = (eager && kv < q) ? q : kv; /* eager GQA saves repeated K/V */
    v_saved = (eager && g.v < g.o_in) ? g.o_in : g.v;
    attn = norm_one + ea * (q + kv_saved + v_saved) + ea * g.o_in + drop_h + ea * g.latent;
    if (rotary)
        attn += 2.0 * ea * (q + kv);
    if (m->qk_norm || m->qk_norm_full)
        attn += (4.0 + ea) * (q + kv); /* fp32 normalised copy + output of q/k norms */
    if (eager) {
        /* fp32 softmax output; its 16-bit (or dropped-out) copy for the PV product; mask;
         * soft-capping (gemma-2) keeps the tanh output too */
        double drop = m->attn_dropout > 0 ? 1.0 : 0.0;
        double copy = (ea != 4.0 || drop > 0) ? ea : 0.0;
        double cap = m->attn_softcap > 0 ? ea : 0.0;
        attn += (double)m->n_heads * (double)seq * (4.0 + drop + copy + cap);
    } else {
        attn += (double)m->n_heads * 4.0; /* logsumexp per head */
    }

    mlp = (m->norms_per_layer >= 2 ? norm_one : 0.0) + drop_h;
    if (m->gated_mlp)
        expert = 4.0 * ea * I; /* gate, act(gate), up, product */
    else
        expert = (2.0 + (m->act == GM_ACT_GELU_NEW ? 3.0 : 0.0)) * ea * I;
    mlp += expert;
    k = m->n_experts ? (double)m->n_experts_active : 1.0;
    if (m->n_experts) /* dispatched inputs, router */
        mlp += g.moe_share * (k * ea * h + 8.0 * (double)m->n_experts);
    if (m->norms_per_layer > 2)
        mlp += (double)(m->norms_per_layer - 2) * norm_one;
    if (m->head != GM_HEAD_SEQ2SEQ_LM)
        return attn + mlp;
    /* encoder-decoder: the decoder's layers add a cross-attention block; the average over
     * both stacks (source and target sequences of 'seq' tokens each) */
    L = (double)m->n_layers;
    Ld = (double)m->n_decoder_layers;
    return (L * (attn + mlp) + Ld * (2.0 * attn + mlp + norm_one)) / (L + Ld);
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
    double P = nu->precision == GM_PREC_FP32 ? 4.0 : 2.0;
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

/* Optimizer state bytes per parameter element, and a description. */
static double state_bytes(const struct gm_job_numerics *nu, double ew,
                          const struct gm_param_counts *pc, uint64_t n, const char **what)
{
    switch (nu->optimizer) {
    case GM_OPT_ADAMW:
    case GM_OPT_ADAM:
        *what = "two moments (exp_avg, exp_avg_sq) in the parameter dtype";
        return 2.0 * ew * (double)n;
    case GM_OPT_SGD:
        *what = "none";
        return 0;
    case GM_OPT_SGD_MOMENTUM:
        *what = "one momentum buffer in the parameter dtype";
        return ew * (double)n;
    case GM_OPT_LION:
        *what = "one momentum buffer in the parameter dtype";
        return ew * (double)n;
    case GM_OPT_ADAMW_8BIT:
        *what = "two 8-bit moments + one fp32 absmax per 2048-element block each";
        return (2.0 + 8.0 / 2048.0) * (double)n;
    case GM_OPT_ADAFACTOR:
        *what = "factored second moment (rows + cols per matrix), no first moment";
        return ew * (double)pc->factored_state;
    case GM_OPT__COUNT:
        break;
    }
    *what = "?";
    return 0;
}

/* Temporaries of the optimizer step. */
static double step_temporaries(const struct gm_job_numerics *nu, double ew, uint64_t n,
                               uint64_t largest, const char **what)
{
    switch (nu->optimizer) {
    case GM_OPT_ADAMW:
    case GM_OPT_ADAM:
        if (nu->optim_impl == GM_OPTIM_FOREACH) {
            *what = "foreach: sqrt(exp_avg_sq) for all parameters at once (1x params)";
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

static enum gm_status train_arch(const struct gm_job *j, const struct gm_model *m,
                                 const struct gm_param_counts *pc, struct gm_estimate *e,
                                 struct gm_error *err)
{
    const struct gm_job_numerics *nu = &j->numerics;
    enum gm_precision prec = nu->precision;
    bool mixed = prec == GM_PREC_FP16_MIXED || prec == GM_PREC_BF16_MIXED;
    bool full = j->memory.checkpointing == GM_CKPT_FULL;
    bool zeros = nu->zero_grad == GM_ZERO_GRAD_ZEROS;
    double ew = prec == GM_PREC_BF16 ? 2.0 : 4.0;
    double ea = prec == GM_PREC_FP32 ? 4.0 : 2.0;
    double er = prec == GM_PREC_BF16 ? 2.0 : 4.0;
    bool eager = est_eager_scores(j);
    uint64_t n = e->n_params, batch = j->workload.batch, seq = j->workload.seq;
    double T = (double)batch * (double)seq;
    double layer_tok = est_layer_saved_per_token(m, ea, er, eager, seq);
    double layer = layer_tok * T;
    double acts, emb, logits = 0, bwd_tmp, state, temps, final_norm;
    const char *state_what, *temp_what;
    char note[GM_EST_NOTE_MAX], b1[32];
    uint64_t largest = pc->largest_tensor ? pc->largest_tensor : n;
    enum gm_status st;

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
                     est_round(2.0 * (double)pc->matmul), GM_EST_PHASE_FORWARD_BACKWARD, true,
                     GM_EXTENT_ALL_LAYERS, note, err);
        if (st != GM_OK)
            return st;
    }
    snprintf(note, sizeof(note), "%llu x %g bytes, %s", (unsigned long long)n, ew,
             zeros ? "kept between steps (zero_grad to zeros)" : "freed by zero_grad(set_to_none)");
    st = est_add(e, GM_KIND_GRADIENTS, "gradients", est_round(ew * (double)n), gradient_phases(j),
                 false, GM_EXTENT_ALL_LAYERS, note, err);
    if (st != GM_OK)
        return st;
    state = state_bytes(nu, ew, pc, n, &state_what);
    if (state > 0) {
        st = est_add(e, GM_KIND_OPTIMIZER_STATE, "optimizer_state", est_round(state),
                     GM_EST_PHASE_TRAIN_ALL, false, GM_EXTENT_ALL_LAYERS, state_what, err);
        if (st != GM_OK)
            return st;
    }
    temps = step_temporaries(nu, ew, n, largest, &temp_what);
    if (temps > 0) {
        st = est_add(e, GM_KIND_OPTIMIZER_TEMP, "optimizer_step_temporaries", est_round(temps),
                     GM_EST_PHASE_OPTIMIZER_STEP, true, GM_EXTENT_ALL_LAYERS, temp_what, err);
        if (st != GM_OK)
            return st;
    }

    /* Saved activations. */
    if (full) {
        acts = (double)est_total_layers(m) * er * (double)m->hidden * T + layer;
        snprintf(note, sizeof(note),
                 "checkpointed: %llu layer inputs x %g B x h, plus one "
                 "layer recomputed (%s)",
                 (unsigned long long)est_total_layers(m), er,
                 mib(b1, sizeof(b1), est_round(layer)));
    } else {
        acts = (double)est_total_layers(m) * layer;
        snprintf(note, sizeof(note), "%llu layers x %.0f bytes/token x %.0f tokens (%s attention)",
                 (unsigned long long)est_total_layers(m), layer_tok, T, eager ? "eager" : "sdpa");
    }
    st = est_add(e, GM_KIND_ACTIVATIONS, "activations", est_round(acts),
                 GM_EST_PHASE_FORWARD_BACKWARD, true, GM_EXTENT_ALL_LAYERS, note, err);
    if (st != GM_OK)
        return st;

    /* Inputs, embedding output extras, final norm: the two ends of the model. */
    final_norm =
        m->final_norm ? (er + (m->norm == GM_NORM_RMS ? 4.0 : 0.0) + ea) * (double)m->hidden : 0.0;
    emb = T * (8.0 + final_norm);
    if (m->emb_norm || m->hidden_dropout > 0)
        emb += T * (double)m->hidden * (1.0 + (m->emb_norm ? er + ea : 0.0));
    st = est_add(e, GM_KIND_ACTIVATIONS, "embeddings_and_final_norm", est_round(emb),
                 GM_EST_PHASE_FORWARD_BACKWARD, true, GM_EXTENT_ENDS,
                 "token ids (int64), embedding norm/dropout, final norm", err);
    if (st != GM_OK)
        return st;

    /* Logits and loss (an encoder-decoder's over its target tokens); final soft-capping
     * (gemma-2) keeps its tanh output too. */
    if (m->head != GM_HEAD_ENCODER) {
        double per = ea + (ea != 4.0 ? 4.0 : 0.0) + 4.0 + (m->final_softcap > 0 ? ea : 0.0);
        logits = T * (double)m->vocab * per;
        snprintf(note, sizeof(note), "B*L*V x %g bytes: logits (%g B)%s + fp32 log-softmax", per,
                 ea, ea != 4.0 ? " + fp32 upcast" : "");
        st = est_add(e, GM_KIND_LOGITS, "logits_and_loss", est_round(logits),
                     GM_EST_PHASE_FORWARD_BACKWARD, true, GM_EXTENT_HEAD, note, err);
        if (st != GM_OK)
            return st;
    }
    /* Backward: the fp32 gradient of the logits (and its 16-bit cast), or the gradients
     * of one layer's activations, whichever is larger. */
    bwd_tmp = layer;
    if (m->head != GM_HEAD_ENCODER) {
        double g = T * (double)m->vocab * (4.0 + (ea != 4.0 ? ea : 0.0));
        if (g > bwd_tmp)
            bwd_tmp = g;
    }
    st = est_add(e, GM_KIND_BACKWARD_TEMP, "backward_transients", est_round(bwd_tmp),
                 GM_EST_PHASE_FORWARD_BACKWARD, true, GM_EXTENT_ONE_LAYER,
                 "max(gradient of the logits, gradients of one layer's "
                 "activations)",
                 err);
    if (st != GM_OK)
        return st;

    /* Assumptions, in the order a reader checks them.  With adapters, the adapter stage
     * says what is trained and in which precision. */
    if (j->memory.adapter == GM_ADAPTER_NONE)
        est_assume(e, "precision %s: %s", gm_precision_name(prec),
                   mixed ? "torch autocast; fp32 parameters (master), gradients and "
                           "optimizer state; 16-bit matmul copies and activations"
                   : prec == GM_PREC_FP32
                       ? "everything fp32"
                       : "pure bf16 parameters, gradients, optimizer state and activations");
    est_assume(e, "optimizer %s: %s; step temporaries: %s", gm_optimizer_name(nu->optimizer),
               state_what, temp_what);
    est_assume(e,
               "activations per layer from the architecture (attention: %s%s), "
               "batch %llu x seq %llu",
               eager ? "eager, s*s scores saved" : "sdpa/flash, no s*s scores",
               full ? ", full checkpointing" : "", (unsigned long long)batch,
               (unsigned long long)seq);
    if (m->head != GM_HEAD_ENCODER)
        est_assume(e, "loss over all B*L positions, logits upcast to fp32 (HF "
                      "ForCausalLMLoss); fused or chunked cross-entropy would remove "
                      "most of logits_and_loss");
    est_assume(e, "gradients %s",
               zeros ? "kept between steps (zero_grad to zeros), so "
                       "they coexist with activations"
                     : "freed by zero_grad(set_to_none=True) (PyTorch "
                       ">= 2.0), allocated during backward");
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
        st = train_arch(j, cx->m, &cx->pc, cx->e, err);
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
    return GM_OK;
}
