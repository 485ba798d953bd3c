/* SPDX-License-Identifier: MIT */
/* stage_parallel.c - the parallel layout stage: per-device memory under data and tensor
 * parallelism, ZeRO / FSDP sharding and CPU offload.
 *
 * Tensor parallel (Megatron, Shoeybi et al. 2019; Korthikanti et al. 2022): every weight
 * matrix and the vocabulary-parallel embedding/lm_head are split t ways, so weights,
 * gradients and optimizer state divide by t (norms are replicated; they are < 0.1% of a
 * transformer).  Activations per layer go from sbh(34 + 5as/h) to sbh(10 + 24/t + 5as/(ht))
 * without sequence parallelism and to sbh/t (34 + 5as/h) with it (Korthikanti Table 2): the
 * 10sbh of LayerNorm/dropout/residual inputs are replicated unless --sequence-parallel.
 * Logits are vocabulary-parallel: divided by t.
 *
 * Data parallel over D = gpus / t replicas (Rajbhandari et al. 2020, ZeRO):
 *   stage 1 partitions optimizer state and fp32 master weights (x 1/D),
 *   stage 2 also gradients, stage 3 also the parameters, which are gathered one layer at a
 *   time (current + prefetched layer in 16-bit, plus the layer's unsharded gradient during
 *   its reduce-scatter).  FSDP FULL_SHARD is modelled as stage 3 with one decoder layer per
 *   unit and no autocast copies (MixedPrecision gathers 16-bit parameters directly).
 *   Plain DDP keeps a bucket copy of the gradients (gradient_as_bucket_view=False, the
 *   default), ZeRO-1/2 a reduce bucket and an all-gather bucket (reduce_bucket_size and
 *   allgather_bucket_size, 5e8 elements in 16-bit), ZeRO-3 a reduce bucket.
 * CPU offload (ZeRO-Offload, Ren et al. 2021; ZeRO-Infinity): optimizer offload moves the
 * optimizer state, fp32 master weights, the step's temporaries and (stage >= 2) the
 * gradient partitions to the host; parameter offload (stage 3 / FSDP) moves the parameter
 * partitions too.  Host bytes are reported per node.
 * The NCCL buffers outside the allocator are a runtime overhead (stage_runtime.c).  vLLM
 * and llama.cpp place their shards themselves (stage_engine.c); this stage leaves them. */
#include "estimate/estimate_int.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* The resolved layout: GPUs, nodes and data-parallel ranks. */
static void fill_layout(const struct gm_job *j, struct gm_est_layout *l)
{
    const struct gm_job_parallel *p = &j->parallel;
    l->gpus = p->gpus;
    l->gpus_per_node = p->gpus_per_node ? p->gpus_per_node : (p->gpus < 8 ? p->gpus : 8);
    l->nodes = est_div_up(p->gpus, l->gpus_per_node);
    l->dp = est_data_parallel(j);
}

/* Ring attention under context parallelism, as torch's context_parallel runs it
 * (torch/distributed/tensor/experimental/_attention.py, pytorch 0123248: the all-gather rotater,
 * torchtitan's default rotate method): per attention call each rank makes its key and value
 * contiguous, concatenates them and all-gathers the concatenation of every rank (kept until the
 * call returns), and _SDPAMerger merges the blocks' outputs in fp32 (the merged output, each
 * block's fp32 cast, the update's difference).  The backward adds fp32 accumulators for dq, dk
 * and dv, the same contiguous copies, concatenation and all-gather, and the fp32 dk|dv
 * concatenation sent round the ring with the one received (its rotater is all-to-all).  Keys and
 * values are as wide as the queries: torchtitan's Attention repeats the KV heads before SDPA
 * (models/llama/model.py, torchtitan 9dec370). */
double est_ring_attention_per_token(const struct gm_job *j, const struct gm_model *m, bool backward)
{
    struct est_geom g;
    double cp = (double)j->parallel.cp, ea = (double)est_weight_elem_bytes(j->numerics.precision);
    if (j->parallel.cp <= 1 || !m)
        return 0;
    est_geom(m, &g);
    if (!backward) /* contiguous k, v; k|v; all-gathered k|v; merged out, block out, difference */
        return g.q * (2.0 * ea + 2.0 * ea + 2.0 * ea * cp + 3.0 * 4.0);
    /* dq, dk, dv accumulators; contiguous k, v; k|v; all-gathered k|v; dk|dv sent and received */
    return g.q * (3.0 * 4.0 + 2.0 * ea + 2.0 * ea + 2.0 * ea * cp + 2.0 * 2.0 * 4.0);
}

size_t est_ring_attention_parts(const struct gm_job *j, const struct gm_model *m, double tokens,
                                uint64_t part[EST_RING_PARTS])
{
    struct est_geom g;
    double ea = (double)est_weight_elem_bytes(j->numerics.precision), w;
    if (j->parallel.cp <= 1 || !m)
        return 0;
    est_geom(m, &g);
    /* the query width on one tensor-parallel rank, over the local tokens */
    w = tokens * g.q / (double)(j->parallel.tp ? j->parallel.tp : 1);
    part[0] = est_round(w * ea);                                /* contiguous k */
    part[1] = est_round(w * ea);                                /* contiguous v */
    part[2] = est_round(w * 2.0 * ea);                          /* k|v */
    part[3] = est_round(w * 2.0 * ea * (double)j->parallel.cp); /* all-gathered k|v */
    part[4] = est_round(w * 4.0);                               /* merged output, fp32 */
    part[5] = est_round(w * 4.0);                               /* a block's output in fp32 */
    part[6] = est_round(w * 4.0);                               /* the update's difference */
    return EST_RING_PARTS;
}

uint64_t est_ring_attention_bytes(const struct gm_job *j, const struct gm_model *m, double tokens)
{
    uint64_t part[EST_RING_PARTS], sum = 0;
    size_t n = est_ring_attention_parts(j, m, tokens, part);
    for (size_t i = 0; i < n; i++)
        sum = gm_add_sat(sum, part[i]);
    return sum;
}

/* Share of the parameters in routed experts (what expert parallelism splits). */
static double expert_share(const struct gm_model *m, uint64_t n)
{
    double per_expert, moe_layers;
    if (!m || !m->n_experts || !n)
        return 0;
    /* routed experts of the layers that have them (DeepSeek and Qwen-MoE keep dense ones) */
    per_expert = (double)m->hidden *
                 (double)(m->moe_intermediate ? m->moe_intermediate : m->intermediate) *
                 (m->gated_mlp ? 3.0 : 2.0);
    moe_layers = (double)est_moe_layers(m);
    return fmin(1.0, moe_layers * (double)m->n_experts * per_expert / (double)n);
}

/* Bytes of model state that expert parallelism leaves on one device when the state is
 * not sharded over the data-parallel ranks: the dense part whole, the experts / ep.  (Sharded
 * state is already split over all D ranks, experts over ep x D/ep.) */
static uint64_t expert_split(uint64_t b, double share, uint64_t ep)
{
    if (ep <= 1 || share <= 0)
        return b;
    return est_round((double)b * (1.0 - share + share / (double)ep));
}

/* Rescale one component for tensor parallelism t and data parallelism D at ZeRO 'stage';
 * *to_host: it moves to host memory; *drop: sharding replaces it. */
static uint64_t shard_bytes(const struct gm_job_parallel *p, int stage, uint64_t D, double share,
                            const struct gm_est_component *c, bool *to_host, bool *drop)
{
    uint64_t t = p->tp, b = c->bytes;
    /* FSDP's parameter offload (FSDP2 CPUOffloadPolicy, FSDP1 CPUOffload(offload_params=True))
     * takes the sharded gradients and the optimizer step with its state to the host too;
     * DeepSpeed's offload_param leaves the optimizer where offload_optimizer says */
    bool state_to_host = p->offload_optimizer || (p->shard == GM_SHARD_FSDP && p->offload_params);
    *to_host = *drop = false;
    switch (c->kind) {
    case GM_KIND_ACTIVATIONS:
    case GM_KIND_BACKWARD_TEMP:
    case GM_KIND_GATHERED:
        if (t > 1)
            b = p->sequence_parallel ? est_div_up(b, t) : gm_mul_div_u64(b, 10 * t + 24, 34 * t);
        return b;
    case GM_KIND_WEIGHTS:
    case GM_KIND_ADAPTERS:
        b = est_div_up(b, t);
        if (stage >= 3) {
            b = est_div_up(b, D);
            *to_host = p->offload_params;
        } else if (c->kind == GM_KIND_WEIGHTS) {
            b = expert_split(b, share, p->ep);
        }
        return b;
    case GM_KIND_WEIGHT_COPIES:
        /* FSDP MixedPrecision and ZeRO-3 gather 16-bit layers instead */
        *drop = stage >= 3;
        return expert_split(est_div_up(b, t), share, p->ep);
    case GM_KIND_MASTER_WEIGHTS:
    case GM_KIND_OPTIMIZER_STATE:
    case GM_KIND_OPTIMIZER_TEMP:
    case GM_KIND_MANAGED: /* paged optimizer state */
        b = est_div_up(b, t);
        if (stage >= 1) {
            b = est_div_up(b, D);
            *to_host = state_to_host;
        } else if (c->extent == GM_EXTENT_ALL_LAYERS) {
            b = expert_split(b, share, p->ep);
        }
        return b;
    case GM_KIND_GRADIENTS:
        b = est_div_up(b, t);
        if (stage >= 2) {
            b = est_div_up(b, D);
            *to_host = state_to_host;
        } else if (c->extent == GM_EXTENT_ALL_LAYERS) {
            b = expert_split(b, share, p->ep);
        }
        return b;
    case GM_KIND_TORCH_WORKSPACE: /* one per GPU, whatever the split */
        return b;
    default:
        return est_div_up(b, t);
    }
}

/* FSDP1 (torch 2.4) under reentrant checkpointing of every layer, as the HF stack
 * (--transformers-version) runs it: gradient_checkpointing_enable() defaults to
 * use_reentrant=True (a custom loop's checkpoint_wrapper defaults to the non-reentrant
 * one, whose forward records the graph).  Each layer's forward runs under no_grad, so
 * FSDP's _register_pre_backward_hooks returns before it marks the unit
 * _needs_pre_backward_unshard; _get_handle_to_prefetch prefetches only a unit so marked, and
 * a unit is marked only in its recomputation, after the backward of the layer above it has
 * asked for the prefetch (torch/distributed/fsdp/_runtime_utils.py).  So BACKWARD_PRE
 * prefetches no decoder layer: one layer is gathered at a time. */
static bool fsdp1_reentrant(const struct gm_job *j)
{
    return est_fsdp1_hf(j) && j->memory.checkpointing == GM_CKPT_FULL &&
           j->memory.checkpoint_every == 1;
}

/* FSDP1 (FullyShardedDataParallel) under the HF stack (--transformers-version): the HF
 * Trainer through accelerate wraps the model, as fsdp1_reentrant() and the step replay's
 * wrap (step_alloc.c fsdp1_wrap()) take it. */
bool est_fsdp1_hf(const struct gm_job *j)
{
    return j->parallel.shard == GM_SHARD_FSDP && j->parallel.fsdp_version == 1 &&
           j->stack.transformers != 0;
}

/* DeepSpeed's contiguous-gradient reduce buffer ("IPG bucket", deepspeed/runtime/zero/
 * stage_1_and_2.py and stage3.py at v0.16.1): torch.empty(int(reduce_bucket_size)) in the
 * optimizer's dtype (16-bit under mixed precision, fp32 in fp32 training), whatever the
 * number of trainable parameters (a LoRA job's 20 M elements still get the whole bucket)
 * and the number of ranks: only contiguous_gradients decides it, so a single-GPU
 * ZeRO-Offload job has it too.  ZeRO-1/2 allocate it in backward() and, with overlap_comm,
 * a second one beside it (double buffering); ZeRO-3 allocates one when the optimizer is
 * built.  No all-gather bucket: from v0.12.4 (PR #4705) the step's all-gather writes the
 * updated partitions straight into the flat 16-bit groups (all_gather_into_tensor). */
static uint64_t zero_ipg_bytes(const struct gm_job *j, int stage)
{
    const struct gm_job_parallel *p = &j->parallel;
    uint64_t one = gm_mul_sat(p->bucket_elements, est_weight_elem_bytes(j->numerics.precision));
    return stage < 3 && p->zero_overlap_comm ? gm_mul_sat(one, 2) : one;
}

static const char *zero_ipg_width(const struct gm_job *j)
{
    return est_weight_elem_bytes(j->numerics.precision) == 4 ? "fp32" : "16-bit";
}

/* What ZeRO-3 keeps gathered because it will use it again soon: DeepSpeed's parameter
 * coordinator, once it has recorded the order in which a step fetches its modules (from the
 * third step on), releases a module's parameters after its forward or backward only when
 * they do not come back among the modules fetched within the next stage3_max_reuse_distance
 * elements (PartitionedParameterCoordinator.__params_to_release: it walks
 * __submodule_order from the current step and stops once the elements walked reach the
 * distance; deepspeed/runtime/zero/partitioned_param_coordinator.py, the same from v0.8.0,
 * bf6b980, to v0.16.4, 38327e0).  The elements are the rank's own (ds_numel): under tensor
 * parallelism a layer's / tp, and a QLoRA base as packed 4-bit storage in the 16-bit
 * bnb_4bit_quant_storage that PEFT's ZeRO-3 QLoRA recipe sets (huggingface/peft
 * docs/source/accelerate/deepspeed.md, 09802c1b): its stored bytes / 2.
 * A module used again is its own backward (or, under checkpointing, its recomputation).
 * The lm_head (H elements, the forward's last module, whose backward comes next) is always
 * kept from its forward to its own backward, and no longer: its post-backward hook
 * (parameter_offload.py _post_backward_module_hook, 38327e0) releases it once nothing
 * ahead in the trace uses it, before the layers' backward, so it is live at the loss only.
 * With c_j the fetches layer j has in the backward (1, 2 when it is recomputed), a layer
 * element with s layer elements after it in the forward comes back after H + s (the rest of
 * the forward) + H + the sum of c_j n_j over the layers after it (their backward): with one c
 * for all, the last (R - 2H) / (1 + c) layer elements stay gathered from their forward to
 * their backward.  A trainable embedding
 * (full training; a frozen one has no backward to fetch it for) comes back in the
 * embedding's backward, at the end of the backward: untied, kept when every layer is and
 * (1 + c) L + 2H < R; tied to the lm_head, the shared weight is kept from the lm_head's
 * backward on when the layers' backward, c L, is within R.  The prefetch skips what is
 * still gathered (__all_gather_params fetches only NOT_AVAILABLE parameters), so of the
 * kept layers the one computed (gathered_params) and the one prefetched (gathered_prefetch)
 * are already counted at the start of backward, the prefetched one at the loss. */
static enum gm_status add_zero3_reused(struct est_ctx *cx, double unit, uint64_t layer_p,
                                       struct gm_error *err)
{
    const struct gm_job *j = cx->job;
    const struct gm_model *m = cx->m;
    double R = (double)j->parallel.zero_reuse_distance, t = (double)j->parallel.tp;
    double keep, walked, c_layers = 0, kept_b, L, H, E = 0, tied = 0, root_b, elem_b, lay_n;
    double head_b, one;
    bool trainable = j->memory.adapter == GM_ADAPTER_NONE;
    char note[GM_EST_NOTE_MAX];
    enum gm_status st;

    if (!m || !layer_p || R <= 0 || unit <= 0)
        return GM_OK;
    root_b = trainable ? (double)est_weight_elem_bytes(j->numerics.precision)
                       : (double)est_frozen_rest_bytes(j);
    /* one layer's ds_numel on this rank: its bytes as gathered_params sizes them (the
     * frozen base as stored, the expert share, / tp) over the storage element */
    elem_b = j->memory.adapter == GM_ADAPTER_QLORA ? 2.0 : root_b;
    lay_n = unit / elem_b;
    L = lay_n * (double)est_total_layers(m);
    H = (double)(cx->pc.lm_head ? cx->pc.lm_head : cx->pc.embedding) / t;
    /* from the last layer down, each with its own c (est_layer_checkpointed: the last one may
     * or may not be recomputed) */
    keep = 0;
    walked = 2.0 * H;
    for (uint64_t i = est_total_layers(m); i-- > 0;) {
        double ci = est_layer_checkpointed(j, i + 1) ? 2.0 : 1.0;
        double f = walked < R ? (R - walked) / ((1.0 + ci) * lay_n) : 0.0;
        keep += (f < 1.0 ? f : 1.0) * lay_n;
        walked += (1.0 + ci) * lay_n;
        c_layers += ci * lay_n;
    }
    if (trainable && cx->pc.lm_head && keep >= L && walked < R)
        E = (double)cx->pc.embedding / t;
    if (trainable && !cx->pc.lm_head && c_layers < R)
        tied = H;
    kept_b = keep / lay_n * unit;
    head_b = tied > 0 ? 0 : H * root_b;
    /* at the start of backward two kept layers are counted already, at the loss one */
    one = kept_b < unit ? kept_b : unit;
    kept_b -= one;
    head_b += kept_b < unit ? kept_b : unit;
    kept_b -= kept_b < unit ? kept_b : unit;
    snprintf(note, sizeof note,
             "kept gathered from its forward to its backward (stage3_max_reuse_distance %.0f "
             "elements): %s",
             R,
             tied > 0                    ? "one of the last layers"
             : head_b > H * root_b + 0.5 ? "the lm_head and one of the last layers"
                                         : "the lm_head, which its backward uses next");
    if (head_b >= 1.0) {
        st = est_add(cx->e, GM_KIND_GATHERED, "zero3_reused_head", est_round(head_b),
                     GM_EST_PHASE_LOSS, true, GM_EXTENT_HEAD, note, err);
        if (st != GM_OK)
            return st;
        est_set_stream(cx->e, GM_EST_STREAM_UNSHARD);
    }
    if (kept_b >= 1.0) {
        snprintf(note, sizeof note,
                 "the last %.1f layers kept gathered into the backward "
                 "(stage3_max_reuse_distance %.0f elements), less the two gathered anyway",
                 keep / lay_n, R);
        st = est_add(cx->e, GM_KIND_GATHERED, "zero3_reused_params", est_round(kept_b),
                     GM_EST_PHASE_SAVED, true, GM_EXTENT_ENDS, note, err);
        if (st != GM_OK)
            return st;
        est_set_stream(cx->e, GM_EST_STREAM_UNSHARD);
    }
    if (E + tied > 0) {
        snprintf(note, sizeof note,
                 "the %s embedding kept gathered until its backward, at the end of the "
                 "backward (stage3_max_reuse_distance %.0f elements)",
                 tied > 0 ? "tied" : "untied", R);
        st = est_add(cx->e, GM_KIND_GATHERED, "zero3_reused_embedding",
                     est_round((E + tied) * root_b), GM_EST_PHASE_SAVED | GM_EST_PHASE_BACKWARD_END,
                     true, GM_EXTENT_ENDS, note, err);
        if (st != GM_OK)
            return st;
        est_set_stream(cx->e, GM_EST_STREAM_UNSHARD);
    }
    est_assume(cx->e,
               "ZeRO-3 keeps gathered what comes back within %.0f elements "
               "(stage3_max_reuse_distance, DeepSpeed's default 1e9), as from the third step "
               "on, once its trace is complete",
               R);
    return GM_OK;
}

/* What ZeRO-3 and FSDP gather: one decoder layer at a time (FSDP's unit with transformer
 * auto-wrap), the current one and the one prefetched, as the job stores its weights (16-bit
 * under mixed precision, the frozen base as stored with adapters), with expert parallelism
 * its share of the experts; its unsharded gradient during the reduce-scatter; FSDP's root
 * unit (embedding, final norm, lm_head), which stays unsharded from its forward to its
 * backward (FSDP1 never reshards the root after forward; FSDP2 keeps the last group).
 * Without resharding after forward every layer stays gathered until its backward. */
static enum gm_status add_gathered(struct est_ctx *cx, double share, struct gm_error *err)
{
    const struct gm_job *j = cx->job;
    const struct gm_job_parallel *p = &j->parallel;
    const struct gm_model *m = cx->m;
    struct gm_estimate *e = cx->e;
    uint64_t t = p->tp, n = cx->n ? cx->n : 1;
    bool fsdp = p->shard == GM_SHARD_FSDP, adapters = j->memory.adapter != GM_ADAPTER_NONE;
    unsigned wbytes = est_weight_elem_bytes(j->numerics.precision);
    uint64_t layer_p = m ? est_layer_params(m, &cx->pc) : cx->pc.largest_tensor;
    uint64_t gbytes = j->numerics.precision == GM_PREC_BF16 ? 2 : 4;
    double unit, layer_share = (double)layer_p / (double)n, layers = m ? (double)m->n_layers : 1.0;
    char note[GM_EST_NOTE_MAX];
    enum gm_status st;

    if (adapters) /* the frozen base as stored (NF4 for QLoRA) */
        unit = (double)e->lora.base_weight_bytes * layer_share;
    else
        unit = (double)layer_p * (double)wbytes;
    unit = (double)expert_split(est_round(unit), share * (m ? 1.0 : 0.0), p->ep) / (double)t;
    if (fsdp && !p->reshard_after_forward) {
        snprintf(note, sizeof note,
                 "every layer stays gathered from its forward to its backward (no resharding "
                 "after forward), %.0f B each",
                 unit);
        st = est_add(e, GM_KIND_GATHERED, "gathered_params", est_round(unit * layers),
                     GM_EST_PHASE_SAVED, true, GM_EXTENT_ALL_LAYERS, note, err);
        if (st == GM_OK)
            est_set_stream(e, GM_EST_STREAM_UNSHARD);
    } else {
        /* the layer being computed, and the next one prefetched, which the backward
         * prefetch already gathers while the loss runs its backward (the last layer);
         * FSDP1 under reentrant checkpointing prefetches nothing (fsdp1_reentrant()) */
        bool prefetch = !fsdp1_reentrant(j);
        snprintf(note, sizeof note, "gathered parameters of the layer computed, %.0f B%s%s", unit,
                 adapters ? " (the frozen base as stored)" : "",
                 prefetch ? "" : "; no backward prefetch (reentrant checkpointing)");
        st = est_add(e, GM_KIND_GATHERED, "gathered_params", est_round(unit),
                     GM_EST_PHASE_FORWARD_BACKWARD, true, GM_EXTENT_ONE_LAYER, note, err);
        if (st == GM_OK)
            est_set_stream(e, GM_EST_STREAM_UNSHARD);
        snprintf(note, sizeof note, "the next layer, prefetched (during the loss: the last)");
        if (st == GM_OK && prefetch)
            st = est_add(e, GM_KIND_GATHERED, "gathered_prefetch", est_round(unit),
                         GM_EST_PHASE_SAVED, true, GM_EXTENT_ONE_LAYER, note, err);
        if (st == GM_OK && prefetch)
            est_set_stream(e, GM_EST_STREAM_UNSHARD);
    }
    if (st != GM_OK)
        return st;
    if (!adapters) {
        uint64_t lt = est_div_up(layer_p, t);
        if (fsdp && p->fsdp_version == 2) {
            /* fully_shard: the unsharded gradients in the parameter dtype, then the
             * reduce-scatter input in the reduce dtype (fp32 under mixed precision, as
             * torchtitan sets it), the previous group's still in flight */
            uint64_t rbytes =
                j->numerics.precision == GM_PREC_BF16 || j->numerics.precision == GM_PREC_FP32
                    ? wbytes
                    : 4;
            snprintf(note, sizeof note,
                     "one layer's unsharded gradient (%u B) and two reduce-scatter inputs "
                     "(%llu B each element)",
                     wbytes, (unsigned long long)rbytes);
            /* under a pipeline (below) no reduce-scatter runs during the micro-batches'
             * backward: the layer's gradient is cast to the reduce dtype and added to the
             * accumulated one instead */
            if (p->pp > 1)
                snprintf(note, sizeof note,
                         "one layer's unsharded gradient (%u B) and its cast to the reduce "
                         "dtype (%llu B each element)",
                         wbytes, (unsigned long long)rbytes);
            st = est_add(
                e, GM_KIND_GATHERED, "gathered_grads",
                gm_add_sat(gm_mul_sat(lt, wbytes), gm_mul_sat(lt, (p->pp > 1 ? 1 : 2) * rbytes)),
                GM_EST_PHASE_FORWARD_BACKWARD, true, GM_EXTENT_ONE_LAYER, note, err);
            /* a pipeline stage's fully_shard modules run every micro-batch's backward with
             * requires_gradient_sync and reshard_after_backward off, and reduce-scatter once
             * after the last (torch/distributed/pipelining/stage.py backward_maybe_with_nosync
             * and _post_backward, pytorch 0138610): fully_shard keeps the unsharded gradients
             * accumulated in the reduce dtype (FSDPParam.to_accumulated_grad_if_needed) for
             * all the stage's parameters meanwhile (the stage's share of this) */
            if (st == GM_OK && p->pp > 1) {
                snprintf(note, sizeof note,
                         "unsharded gradients accumulated over the micro-batches (%llu B each "
                         "element), reduce-scattered after the last",
                         (unsigned long long)rbytes);
                st = est_add(e, GM_KIND_GATHERED, "accumulated_grads",
                             gm_mul_sat(est_div_up(n, t), rbytes), GM_EST_PHASE_SAVED, true,
                             GM_EXTENT_ALL_LAYERS, note, err);
            }
        } else {
            snprintf(note, sizeof note,
                     "one layer's unsharded gradient during reduce-scatter (%llu B each)",
                     (unsigned long long)gbytes);
            st = est_add(e, GM_KIND_GATHERED, "gathered_grads", gm_mul_sat(lt, gbytes),
                         GM_EST_PHASE_FORWARD_BACKWARD, true, GM_EXTENT_ONE_LAYER, note, err);
        }
        if (st != GM_OK)
            return st;
    }
    if (fsdp && m && p->shard_ends) {
        /* the lm_head with the final norm is a unit of its own, gathered for its forward and
         * its backward (torchtitan keeps [norm, output] gathered in between, torchtune
         * reshards and prefetches it again): both at the loss; the untied embedding, another
         * unit, only for its own forward and backward, at the two ends of the step */
        double root_b = adapters ? (double)est_frozen_rest_bytes(j) : (double)wbytes;
        uint64_t head_p = (cx->pc.lm_head ? cx->pc.lm_head : cx->pc.embedding) + m->hidden;
        st = est_add(e, GM_KIND_GATHERED, "gathered_head",
                     est_round((double)head_p * root_b / (double)t), GM_EST_PHASE_LOSS, true,
                     GM_EXTENT_HEAD,
                     "lm_head and final norm, a unit of their own, gathered for the loss", err);
        if (st == GM_OK)
            est_set_stream(e, GM_EST_STREAM_UNSHARD);
        if (st == GM_OK && cx->pc.lm_head && cx->pc.embedding)
            st = est_add(e, GM_KIND_GATHERED, "gathered_embedding",
                         est_round((double)cx->pc.embedding * root_b / (double)t),
                         GM_EST_PHASE_BACKWARD_END, true, GM_EXTENT_ENDS,
                         "the embedding, a unit of its own, gathered for its backward", err);
        if (st == GM_OK)
            est_set_stream(e, GM_EST_STREAM_UNSHARD);
        if (st != GM_OK)
            return st;
    } else if (fsdp && m) {
        uint64_t root_p = cx->pc.embedding + cx->pc.lm_head + m->hidden;
        double root_b = adapters ? (double)est_frozen_rest_bytes(j) : (double)wbytes;
        snprintf(note, sizeof note,
                 "FSDP root unit (embedding, final norm, lm_head) unsharded from its forward to "
                 "its backward");
        st = est_add(e, GM_KIND_GATHERED, "gathered_root",
                     est_round((double)root_p * root_b / (double)t), GM_EST_PHASE_SAVED, true,
                     GM_EXTENT_ENDS, note, err);
        if (st == GM_OK)
            est_set_stream(e, GM_EST_STREAM_UNSHARD);
        if (st != GM_OK)
            return st;
    }
    if (p->shard == GM_SHARD_ZERO3 && (st = add_zero3_reused(cx, unit, layer_p, err)) != GM_OK)
        return st;
    if (p->shard == GM_SHARD_ZERO3) {
        snprintf(note, sizeof note, "ZeRO-3 reduce bucket, %llu elements in %s",
                 (unsigned long long)p->bucket_elements, zero_ipg_width(j));
        if (p->zero_overlap_comm)
            est_assume(e, "ZeRO-3 keeps one reduce buffer whatever overlap_comm (stage3.py "
                          "__ipg_bucket_flat_buffer)");
        if ((st = est_add(e, GM_KIND_COMM_BUFFERS, "zero_reduce_bucket", zero_ipg_bytes(j, 3),
                          GM_EST_PHASE_TRAIN_ALL, true, GM_EXTENT_ONE_LAYER, note, err)))
            return st;
    }
    return GM_OK;
}

/* FSDP1 with a frozen base under reentrant checkpointing (fsdp1_reentrant()).  With
 * adapters the base layers are FSDP units of their own whose flat parameter needs no
 * gradient: PEFT's fsdp_auto_wrap_policy wraps the trainable LoRA leaves separately, and the
 * HF Trainer sets it for every LoRA model (Trainer._fsdp_qlora_plugin_updates; FOAK's fused
 * LoRA makes the adapters FSDP-ignored modules instead).  For such a unit FSDP's
 * _pre_forward registers _register_post_backward_reshard_only_hook: a multi-grad hook on the
 * unit's inputs that need a gradient (torch/distributed/fsdp/_runtime_utils.py).  In the
 * recomputation of a reentrant checkpoint that input is the checkpoint's detached layer
 * input, a leaf; the hook's closure holds its AccumulateGrad node, which holds the tensor
 * (torch/autograd/graph.py register_multi_grad_hook; AccumulateGrad::variable), and the
 * tensor's hook dict holds the closure.  That cycle passes through C++ and stays until
 * _finalize_params removes the hook in the post-backward final callback.  So every layer's
 * checkpointed input and the gradient the backward accumulated into it (.grad, which
 * CheckpointFunction.backward returns) live until the end of backward: at the first
 * layer's backward, L - 1 gradients of layer inputs beyond what a single GPU holds, whose
 * inputs are all still alive (counted in the checkpointed inputs). */
static enum gm_status add_fsdp1_reentrant(struct est_ctx *cx, struct gm_error *err)
{
    const struct gm_job *j = cx->job;
    const struct gm_job_parallel *p = &j->parallel;
    const struct gm_model *m = cx->m;
    double layers, in;
    char note[GM_EST_NOTE_MAX];
    enum gm_status st;

    if (j->mode != GM_EST_TRAIN || !fsdp1_reentrant(j))
        return GM_OK;
    est_assume(cx->e, "FSDP1 under the HF stack's reentrant checkpointing: no layer prefetched "
                      "for backward (the no_grad forward marks no unit for its pre-backward "
                      "unshard)");
    if (!m || j->memory.adapter == GM_ADAPTER_NONE)
        return GM_OK;
    layers = (double)est_total_layers(m);
    if (layers < 2)
        return GM_OK;
    /* a layer input as the checkpoint keeps it: the residual stream, replicated under tensor
     * parallelism unless the sequence is split */
    in = est_residual_bytes(j, m) * (double)m->hidden * cx->tokens;
    if (p->tp > 1 && p->sequence_parallel)
        in /= (double)p->tp;
    snprintf(note, sizeof note,
             "gradients of %.0f checkpointed layer inputs (%.0f B each), kept with the inputs "
             "until the end of backward by FSDP1's reshard-only hook on frozen units",
             layers - 1.0, in);
    st = est_add(cx->e, GM_KIND_BACKWARD_TEMP, "fsdp_kept_input_grads",
                 est_round((layers - 1.0) * in), GM_EST_PHASE_FORWARD_BACKWARD, true,
                 GM_EXTENT_ALL_LAYERS, note, err);
    if (st != GM_OK)
        return st;
    est_assume(cx->e, "FSDP1 with a frozen base (PEFT's wrap policy) and reentrant "
                      "checkpointing: each base unit's reshard-only hook keeps its layer input "
                      "and that input's gradient to the end of backward");
    return GM_OK;
}

/* Expert parallelism: each MoE layer sends its routed tokens to the ranks holding their
 * experts and receives those routed to its own: the received rows and the combined
 * outputs coming back sit beside the dispatched copy (torchtitan's token dispatcher,
 * dropless).  Balanced routing receives T x top-k rows; the high end of the range all
 * ep x T x top-k (every rank routing to this rank's experts). */
static enum gm_status add_expert_dispatch(struct est_ctx *cx, struct gm_error *err)
{
    const struct gm_job *j = cx->job;
    const struct gm_model *m = cx->m;
    struct gm_estimate *e = cx->e;
    double ea = (double)est_weight_elem_bytes(j->numerics.precision), k, per_layer, skew;
    bool ckpt = j->memory.checkpointing == GM_CKPT_FULL || j->memory.checkpointing == GM_CKPT_OP;
    char note[GM_EST_NOTE_MAX];

    if (j->parallel.ep <= 1 || j->mode != GM_EST_TRAIN)
        return GM_OK;
    if (!m || !m->n_experts)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "--ep applies to MoE models (this one has no experts)");
    if (m->n_experts % j->parallel.ep != 0)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "--ep %llu does not divide the %llu experts",
                       (unsigned long long)j->parallel.ep, (unsigned long long)m->n_experts);
    k = (double)m->n_experts_active;
    skew = est_uncertain(cx, GM_UNCERTAIN_APPROX, false, 1.0, 1.0, (double)j->parallel.ep);
    per_layer = 2.0 * k * ea * (double)m->hidden * cx->tokens * skew;
    snprintf(note, sizeof note,
             "all-to-all: received rows and returned outputs, %.0f x top-%.0f rows per layer", skew,
             k);
    est_assume(e,
               "expert parallel %llu: %llu of %llu experts per GPU; balanced routing (the "
               "range's high end: every token routed to one rank)",
               (unsigned long long)j->parallel.ep,
               (unsigned long long)(m->n_experts / j->parallel.ep),
               (unsigned long long)m->n_experts);
    return est_add(e, GM_KIND_ACTIVATIONS, "expert_dispatch",
                   est_round(per_layer * (ckpt ? 1.0 : (double)est_moe_layers(m))),
                   ckpt ? GM_EST_PHASE_FORWARD_BACKWARD : GM_EST_PHASE_SAVED, true,
                   ckpt ? GM_EXTENT_ONE_LAYER : GM_EXTENT_ALL_LAYERS, note, err);
}

/* The lm_head's input under sequence parallelism as torch's TP plan runs it (every TP job
 * but Megatron's, as the loss above): torchtitan's apply_tp (parallelisms/parallelize_llama.py
 * at 9dec370) makes the output ColwiseParallel(input_layouts=Shard(1)), whose input hook
 * redistributes the final norm's sequence-sharded output to Replicate (an all-gather), and
 * F.linear saves that local input, the whole sequence, for the weight's gradient until the
 * head's backward right after the loss's.  The training stage counted the head's input at
 * T x hidden, which the sharding above divided by t; the gathered tensor replaces it, so
 * T x hidden x (1 - 1/t) more at the loss.  (Megatron's sequence-parallel linear keeps the
 * sharded input and gathers it again in backward: nothing more.) */
static enum gm_status add_head_input(struct est_ctx *cx, struct gm_error *err)
{
    const struct gm_job *j = cx->job;
    const struct gm_model *m = cx->m;
    uint64_t t = j->parallel.tp, whole;
    double ea = est_act_elem_bytes(j);
    char note[GM_EST_NOTE_MAX];
    if (j->mode != GM_EST_TRAIN || !est_torch_tp_plan(j) || !j->parallel.sequence_parallel || !m ||
        !m->final_norm || m->head == GM_HEAD_ENCODER || !est_head_saves_input(j))
        return GM_OK;
    whole = est_round(cx->tokens * (double)m->hidden * ea);
    snprintf(note, sizeof note,
             "lm_head input gathered over the sequence, saved for its weight gradient: "
             "%llu B less the 1/%llu kept with the final norm",
             (unsigned long long)whole, (unsigned long long)t);
    return est_add(cx->e, GM_KIND_ACTIVATIONS, "head_input_gathered", whole - est_div_up(whole, t),
                   GM_EST_PHASE_LOSS, true, GM_EXTENT_HEAD, note, err);
}

enum gm_status est_stage_parallel(struct est_ctx *cx, struct gm_error *err)
{
    const struct gm_job *j = cx->job;
    const struct gm_job_parallel *p = &j->parallel;
    const struct gm_model *m = cx->m;
    struct gm_estimate *e = cx->e;
    struct gm_est_layout *l = &e->layout;
    uint64_t t = p->tp, g = p->gpus, D, cpu = 0, grads = 0, n = cx->n;
    int stage = p->shard == GM_SHARD_FSDP ? 3 : (int)p->shard;
    double share = expert_share(m, n);
    char note[GM_EST_NOTE_MAX], ranks[96] = "data-parallel ranks";
    enum gm_status st;

    fill_layout(j, l);
    /* the logits are split by vocabulary over the tensor-parallel ranks (the logits
     * component below is divided by t) */
    if (t > 1)
        e->loss_vocab = est_div_up(e->loss_vocab, t);
    /* activations offloaded by the training stage: host memory of each GPU */
    l->host_bytes_per_node = gm_mul_sat(est_round(cx->host_activation_bytes), l->gpus_per_node);
    if (est_allocator(j) != EST_ALLOC_TORCH)
        return GM_OK; /* weights only, or an engine that places its own shards */
    if (g <= 1 && t <= 1 && p->shard == GM_SHARD_NONE) {
        if (j->mode == GM_EST_TRAIN && j->method != GM_METHOD_BLOG)
            est_assume(e, "single GPU, no tensor/pipeline/data-parallel sharding, no "
                          "CPU offload");
        return GM_OK;
    }
    /* query heads split evenly; KV heads split, or are replicated when fewer than t */
    if (m && !est_tp_divides(m, t))
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "--tp %llu does not divide the %llu attention heads / %llu KV heads",
                       (unsigned long long)t, (unsigned long long)m->n_heads,
                       (unsigned long long)m->n_kv_heads);
    D = l->dp;

    for (size_t i = e->n_components; i-- > 0;) {
        struct gm_est_component *c = &e->components[i];
        bool to_host, drop;
        uint64_t b = shard_bytes(p, stage, D, share, c, &to_host, &drop);
        if (drop) {
            est_remove(e, i);
            continue;
        }
        if (c->kind == GM_KIND_GRADIENTS && !to_host)
            grads = gm_add_sat(grads, b);
        /* FSDP's reduce-scatter stream allocates the sharded gradients
         * (_get_reduce_scatter_tensors in torch/distributed/fsdp/_runtime_utils.py) */
        if (c->kind == GM_KIND_GRADIENTS && p->shard == GM_SHARD_FSDP && D > 1 &&
            c->extent == GM_EXTENT_ALL_LAYERS)
            c->stream = GM_EST_STREAM_REDUCE;
        if (to_host) {
            cpu = gm_add_sat(cpu, gm_mul_sat(b, l->gpus_per_node));
            est_remove(e, i);
            continue;
        }
        if (b != c->bytes) {
            est_note_append(c, "per device");
            c->bytes = b;
        }
    }
    l->host_bytes_per_node = gm_add_sat(l->host_bytes_per_node, cpu);
    if ((st = add_expert_dispatch(cx, err)) != GM_OK)
        return st;
    if ((st = add_head_input(cx, err)) != GM_OK)
        return st;
    if (j->mode == GM_EST_INFER && D > 1)
        est_assume(e,
                   "%llu independent replicas of the model (data parallel inference): "
                   "figures are per GPU",
                   (unsigned long long)D);
    if (stage == 0 && D > 1 && !p->ddp_bucket_view && grads) {
        if ((st = est_add(e, GM_KIND_COMM_BUFFERS, "ddp_grad_buckets", grads,
                          GM_EST_PHASE_TRAIN_ALL, false, GM_EXTENT_ALL_LAYERS,
                          "DDP bucket copy of the gradients "
                          "(gradient_as_bucket_view=False)",
                          err)))
            return st;
    }
    if (stage >= 1 && stage <= 2) {
        snprintf(note, sizeof note, "ZeRO reduce bucket%s, %llu elements in %s%s",
                 p->zero_overlap_comm ? "s" : "", (unsigned long long)p->bucket_elements,
                 zero_ipg_width(j), p->zero_overlap_comm ? " each (overlap_comm)" : "");
        /* made in the optimizer's backward() before loss.backward(), freed at its end: the
         * loss's backward included */
        if ((st = est_add(e, GM_KIND_COMM_BUFFERS, "zero_reduce_bucket", zero_ipg_bytes(j, stage),
                          GM_EST_PHASE_SAVED, true, GM_EXTENT_ONE_LAYER, note, err)))
            return st;
    }
    if (stage == 3 && (st = add_gathered(cx, share, err)) != GM_OK)
        return st;
    if (t > 1)
        est_assume(e,
                   "tensor parallel %llu: weights, gradients, optimizer state and logits "
                   "divided by %llu; activations %s",
                   (unsigned long long)t, (unsigned long long)t,
                   p->sequence_parallel ? "divided by t (sequence parallel)"
                                        : "x (10 + 24/t)/34 (Korthikanti, no sequence "
                                          "parallelism)");
    if (p->cp > 1)
        est_assume(e,
                   "context parallel %llu (ring attention, all-gather rotation): each rank holds "
                   "seq / %llu = %llu tokens and gathers all ranks' keys and values; %s over "
                   "data x context ranks",
                   (unsigned long long)p->cp, (unsigned long long)p->cp,
                   (unsigned long long)(j->workload.seq / p->cp),
                   p->shard == GM_SHARD_FSDP ? "FSDP shards" : "gradients averaged");
    if (p->cp > 1)
        snprintf(ranks, sizeof ranks, "data x context ranks (%llu x %llu)",
                 (unsigned long long)(D / p->cp), (unsigned long long)p->cp);
    if (j->mode == GM_EST_TRAIN && (p->shard != GM_SHARD_NONE || D > 1))
        est_assume(e, "%s%s over %llu %s (%llu GPUs, %llu per node)%s%s", gm_shard_name(p->shard),
                   p->shard != GM_SHARD_FSDP  ? ""
                   : p->fsdp_version == 2     ? (p->reshard_after_forward ? " (FSDP2 fully_shard)"
                                                                          : " (FSDP2 fully_shard, "
                                                                            "no resharding after "
                                                                            "forward)")
                   : p->reshard_after_forward ? " (FSDP1 FULL_SHARD)"
                                              : " (FSDP1 SHARD_GRAD_OP)",
                   (unsigned long long)D, ranks, (unsigned long long)g,
                   (unsigned long long)l->gpus_per_node,
                   p->offload_optimizer ? "; optimizer state, master weights and step on "
                                          "the CPU"
                                        : "",
                   p->offload_params ? "; parameters offloaded to the CPU" : "");
    return add_fsdp1_reentrant(cx, err);
}
