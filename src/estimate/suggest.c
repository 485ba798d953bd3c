/* SPDX-License-Identifier: MIT */
/* suggest.c - what to change when a job does not fit.
 *
 * The candidate table below lists the changes people make, each with what it costs and a
 * function that says whether it applies to the job and which settings it changes (the
 * same names and values a user types: "--zero 3", "--batch 2 --grad-accum 8").  Every
 * candidate is applied through gm_job_set(), run through the whole pipeline and judged by
 * the one fit verdict.  When some fit, they are the answer: cheapest first, and within one
 * cost the mildest (the one that saves least and still fits) first.  When none fits, the
 * ones that bring the job closer are listed, closest first (those that do not help are
 * left out), and a combination is searched: repeatedly add the change that brings
 * the job closest to fitting, then drop every change the combination can do without.  A
 * larger GPU from the catalog is the last resort; when even that does not fit, the
 * answer says so (none_fits). */
#include "estimate/estimate_int.h"

#include "gpumem/arena.h"

#include <stdio.h>
#include <string.h>

#define MAX_SETS   4
#define MAX_TRIED  32
#define MAX_LISTED 15 /* changes listed, beside a combination */

/* Settings one change makes, as typed values by setting id, and the one it takes back
 * (--qlora replaces --lora). */
struct change {
    size_t n;
    struct {
        enum est_setting id;
        union gm_job_value v;
    } set[MAX_SETS];
    bool has_unset;
    enum est_setting unset;
};

struct sugg_ctx {
    const struct gm_job *job;
    const struct gm_estimate *base;
    struct gm_estimate *scratch; /* any candidate may run estimates in it */
};

static void put(struct change *c, enum est_setting id, union gm_job_value v)
{
    if (c->n >= MAX_SETS)
        return;
    c->set[c->n].id = id;
    c->set[c->n].v = v;
    c->n++;
}

static void put_u64(struct change *c, enum est_setting id, uint64_t u)
{
    put(c, id, (union gm_job_value){.u64 = u});
}

/* An enum value of a choice. */
static void put_choice(struct change *c, enum est_setting id, int choice)
{
    put(c, id, (union gm_job_value){.choice = choice});
}

static void put_number(struct change *c, enum est_setting id, double number)
{
    put(c, id, (union gm_job_value){.number = number});
}

static void put_flag(struct change *c, enum est_setting id)
{
    put(c, id, (union gm_job_value){.flag = true});
}

/* A setting whose value is a name (a GPU, a kernel list); static storage. */
static void put_text(struct change *c, enum est_setting id, const char *text)
{
    put(c, id, (union gm_job_value){.text = text});
}

/* The job with the change made; false when a setting refuses it. */
static bool apply(const struct gm_job *job, const struct change *c, struct gm_job *out)
{
    *out = *job;
    if (c->has_unset)
        est_job_mark(out, c->unset, false);
    for (size_t i = 0; i < c->n; i++)
        if (est_job_put(out, c->set[i].id, &c->set[i].v, NULL) != GM_OK)
            return false;
    return gm_job_check(out, NULL) == GM_OK;
}

static bool training_arch(const struct gm_job *j)
{
    return j->mode == GM_EST_TRAIN && j->method != GM_METHOD_BLOG && j->model.model;
}

static bool adam(const struct gm_job *j)
{
    return j->numerics.optimizer == GM_OPT_ADAMW || j->numerics.optimizer == GM_OPT_ADAM;
}

static uint64_t data_parallel(const struct gm_job *j)
{
    struct gm_job r = *j;
    est_job_resolve(&r);
    return est_data_parallel(&r);
}

/* ---- the candidates ---- */

static bool c_ckpt_full(const struct sugg_ctx *sx, struct change *c)
{
    if (sx->job->mode != GM_EST_TRAIN || sx->job->memory.checkpointing == GM_CKPT_FULL)
        return false;
    put_choice(c, EST_SET_GRAD_CHECKPOINTING, GM_CKPT_FULL);
    return true;
}

static bool c_ckpt_selective(const struct sugg_ctx *sx, struct change *c)
{
    const struct gm_job *j = sx->job;
    if (!training_arch(j) || j->memory.checkpointing != GM_CKPT_NONE ||
        j->memory.attention != GM_ATTN_EAGER)
        return false;
    put_choice(c, EST_SET_GRAD_CHECKPOINTING, GM_CKPT_SELECTIVE);
    return true;
}

static bool c_sdpa(const struct sugg_ctx *sx, struct change *c)
{
    if (sx->job->mode == GM_EST_WEIGHTS || sx->job->memory.attention != GM_ATTN_EAGER)
        return false;
    put_choice(c, EST_SET_ATTENTION, GM_ATTN_SDPA);
    return true;
}

static bool c_fused(const struct sugg_ctx *sx, struct change *c)
{
    const struct gm_job *j = sx->job;
    if (!training_arch(j) || !adam(j) || j->numerics.optim_impl != GM_OPTIM_FOREACH)
        return false;
    put_choice(c, EST_SET_OPTIMIZER_IMPL, GM_OPTIM_FUSED);
    return true;
}

/* ---- candidates of the memory techniques ---- */

static bool causal_lm(const struct gm_job *j)
{
    return j->model.model && j->model.model->head == GM_HEAD_CAUSAL_LM;
}

/* The lower-memory losses, for a job computing all B*L logits. */
static bool c_loss(const struct sugg_ctx *sx, struct change *c, enum gm_loss to)
{
    const struct gm_job *j = sx->job;
    if (!training_arch(j) || !causal_lm(j) || j->memory.loss == GM_LOSS_FUSED_LINEAR ||
        (to == GM_LOSS_CHUNKED && j->memory.loss != GM_LOSS_FULL))
        return false;
    put_choice(c, EST_SET_LOSS, to);
    return true;
}

static bool c_loss_fused_linear(const struct sugg_ctx *sx, struct change *c)
{
    return c_loss(sx, c, GM_LOSS_FUSED_LINEAR);
}

static bool c_loss_chunked(const struct sugg_ctx *sx, struct change *c)
{
    return c_loss(sx, c, GM_LOSS_CHUNKED);
}

static bool c_fused_kernels(const struct sugg_ctx *sx, struct change *c)
{
    const struct gm_job *j = sx->job;
    if (!training_arch(j) || j->memory.fused_kernels == GM_FUSED_ALL ||
        j->model.model->norm != GM_NORM_RMS)
        return false;
    put_text(c, EST_SET_FUSED_KERNELS, "liger");
    return true;
}

static bool c_optimizer_in_backward(const struct sugg_ctx *sx, struct change *c)
{
    const struct gm_job *j = sx->job;
    if (!training_arch(j) || j->memory.optimizer_in_backward || j->workload.grad_accum > 1 ||
        j->memory.adapter != GM_ADAPTER_NONE || j->parallel.pp > 1 ||
        j->parallel.offload_optimizer ||
        (j->parallel.shard != GM_SHARD_NONE && j->parallel.shard != GM_SHARD_FSDP))
        return false;
    put_flag(c, EST_SET_OPTIMIZER_IN_BACKWARD);
    return true;
}

static bool c_ckpt_op(const struct sugg_ctx *sx, struct change *c)
{
    const struct gm_job *j = sx->job;
    if (!training_arch(j) || j->memory.checkpointing != GM_CKPT_NONE)
        return false;
    put_choice(c, EST_SET_GRAD_CHECKPOINTING, GM_CKPT_OP);
    return true;
}

static bool c_activation_offload(const struct sugg_ctx *sx, struct change *c)
{
    const struct gm_job *j = sx->job;
    if (!training_arch(j) || j->memory.activation_offload)
        return false;
    put_flag(c, EST_SET_ACTIVATION_OFFLOAD);
    return true;
}

/* The largest smaller micro-batch that fits with the same tokens per optimizer step; the
 * smallest one when none does. */
static bool c_micro_batch(const struct sugg_ctx *sx, struct change *c)
{
    const struct gm_job *j = sx->job;
    uint64_t b = j->workload.batch, pick = 1;
    if (j->mode != GM_EST_TRAIN || b <= 1 || j->workload.tokens)
        return false;
    for (uint64_t d = b / 2; d >= 1; d--) {
        struct change t = {0};
        struct gm_job a;
        if (b % d)
            continue;
        put_u64(&t, EST_SET_BATCH, d);
        put_u64(&t, EST_SET_GRAD_ACCUM, j->workload.grad_accum * (b / d));
        if (apply(j, &t, &a) && est_rerun(&a, sx->scratch, NULL) == GM_OK &&
            sx->scratch->fit.fits) {
            pick = d;
            break;
        }
    }
    put_u64(c, EST_SET_BATCH, pick);
    put_u64(c, EST_SET_GRAD_ACCUM, j->workload.grad_accum * (b / pick));
    return true;
}

static bool c_lora(const struct sugg_ctx *sx, struct change *c)
{
    if (!training_arch(sx->job) || sx->job->memory.adapter != GM_ADAPTER_NONE)
        return false;
    put_flag(c, EST_SET_LORA);
    return true;
}

static bool c_qlora(const struct sugg_ctx *sx, struct change *c)
{
    if (!training_arch(sx->job) || sx->job->memory.adapter == GM_ADAPTER_QLORA)
        return false;
    put_flag(c, EST_SET_QLORA);
    c->has_unset = true;
    c->unset = EST_SET_LORA;
    return true;
}

static bool c_adamw_8bit(const struct sugg_ctx *sx, struct change *c)
{
    if (!training_arch(sx->job) || !adam(sx->job))
        return false;
    put_choice(c, EST_SET_OPTIMIZER, GM_OPT_ADAMW_8BIT);
    return true;
}

static bool c_paged(const struct sugg_ctx *sx, struct change *c)
{
    const struct gm_job *j = sx->job;
    if (!training_arch(j) || j->memory.paged_optimizer || j->numerics.optimizer == GM_OPT_SGD)
        return false;
    put_flag(c, EST_SET_PAGED_OPTIMIZER);
    return true;
}

static bool c_pure_bf16(const struct sugg_ctx *sx, struct change *c)
{
    const struct gm_job *j = sx->job;
    if (!training_arch(j) || j->numerics.precision == GM_PREC_BF16 ||
        j->memory.adapter != GM_ADAPTER_NONE)
        return false;
    put_choice(c, EST_SET_PRECISION, GM_PREC_BF16);
    return true;
}

static bool zero_applies(const struct gm_job *j, enum gm_shard to)
{
    if (!training_arch(j) || j->method == GM_METHOD_DEEPSPEED || data_parallel(j) < 2)
        return false;
    if (j->parallel.pp > 1 && to != GM_SHARD_ZERO1)
        return false;
    if (j->parallel.shard == GM_SHARD_FSDP)
        return false;
    return to == GM_SHARD_FSDP ? j->parallel.shard < GM_SHARD_ZERO3 : j->parallel.shard < to;
}

static bool c_zero(const struct sugg_ctx *sx, struct change *c, enum gm_shard to)
{
    if (!zero_applies(sx->job, to))
        return false;
    put_choice(c, EST_SET_ZERO, (int)to);
    return true;
}

static bool c_zero1(const struct sugg_ctx *sx, struct change *c)
{
    return c_zero(sx, c, GM_SHARD_ZERO1);
}

static bool c_zero2(const struct sugg_ctx *sx, struct change *c)
{
    return c_zero(sx, c, GM_SHARD_ZERO2);
}

static bool c_zero3(const struct sugg_ctx *sx, struct change *c)
{
    return c_zero(sx, c, GM_SHARD_ZERO3);
}

static bool c_fsdp(const struct sugg_ctx *sx, struct change *c)
{
    if (!zero_applies(sx->job, GM_SHARD_FSDP))
        return false;
    put_flag(c, EST_SET_FSDP);
    c->has_unset = true;
    c->unset = EST_SET_ZERO;
    return true;
}

static bool c_offload_optimizer(const struct sugg_ctx *sx, struct change *c)
{
    const struct gm_job *j = sx->job;
    if (!training_arch(j) || j->method == GM_METHOD_DEEPSPEED || j->parallel.offload_optimizer ||
        j->parallel.pp > 1)
        return false;
    if (j->parallel.shard == GM_SHARD_NONE)
        put_choice(c, EST_SET_ZERO, GM_SHARD_ZERO2);
    put_flag(c, EST_SET_OFFLOAD_OPTIMIZER);
    return true;
}

static bool c_offload_params(const struct sugg_ctx *sx, struct change *c)
{
    const struct gm_job *j = sx->job;
    if (!training_arch(j) || j->method == GM_METHOD_DEEPSPEED || j->parallel.offload_params ||
        j->parallel.pp > 1)
        return false;
    if (j->parallel.shard != GM_SHARD_ZERO3 && j->parallel.shard != GM_SHARD_FSDP)
        put_choice(c, EST_SET_ZERO, GM_SHARD_ZERO3);
    if (!j->parallel.offload_optimizer)
        put_flag(c, EST_SET_OFFLOAD_OPTIMIZER);
    put_flag(c, EST_SET_OFFLOAD_PARAMS);
    return true;
}

static bool c_kv_fp8(const struct sugg_ctx *sx, struct change *c)
{
    const struct gm_job *j = sx->job;
    enum gm_dtype kv = j->numerics.kv_dtype;
    if (j->mode != GM_EST_INFER || kv == GM_DTYPE_F8_E4M3 || kv == GM_DTYPE_INT4 ||
        kv == GM_DTYPE_I8)
        return false;
    put_choice(c, EST_SET_KV_DTYPE,
               j->engine.kind == GM_ENGINE_LLAMACPP ? GM_DTYPE_I8 : GM_DTYPE_F8_E4M3);
    return true;
}

static bool c_flash_attn(const struct sugg_ctx *sx, struct change *c)
{
    const struct gm_job *j = sx->job;
    if (j->mode != GM_EST_INFER || j->engine.kind != GM_ENGINE_LLAMACPP ||
        j->engine.llamacpp.flash_attn)
        return false;
    put_flag(c, EST_SET_FLASH_ATTN);
    return true;
}

/* ---- weight formats (bitsandbytes, GPTQ, AWQ, FP8) ---- */

/* Whether the job's weights can take a weight format: inference or weights on a model whose
 * layout gpumem counts, in plain floats so far, served by an engine that loads such
 * checkpoints (llama.cpp reads GGUF types instead). */
static bool quantisable(const struct gm_job *j)
{
    const struct gm_model *m = j->model.model;
    if (j->mode == GM_EST_TRAIN || !m || j->engine.kind == GM_ENGINE_LLAMACPP ||
        j->numerics.weight_format != GM_WEIGHTS_AS_STORED || m->quant.method != GM_QUANT_NONE)
        return false;
    return gm_model_validate(m, NULL) == GM_OK;
}

static bool c_quant(const struct sugg_ctx *sx, struct change *c, enum est_quant_choice scheme)
{
    if (!quantisable(sx->job))
        return false;
    put_choice(c, EST_SET_QUANT, (int)scheme);
    return true;
}

static bool c_quant_fp8(const struct sugg_ctx *sx, struct change *c)
{
    return c_quant(sx, c, EST_QUANT_FP8);
}

static bool c_quant_awq(const struct sugg_ctx *sx, struct change *c)
{
    return c_quant(sx, c, EST_QUANT_AWQ);
}

static bool c_quant_gptq(const struct sugg_ctx *sx, struct change *c)
{
    return c_quant(sx, c, EST_QUANT_GPTQ);
}

/* bitsandbytes quantises at load time: transformers (and vLLM) load it from any
 * checkpoint. */
static bool c_quant_nf4(const struct sugg_ctx *sx, struct change *c)
{
    if (sx->job->engine.kind == GM_ENGINE_VLLM)
        return false;
    return c_quant(sx, c, EST_QUANT_NF4_DQ);
}

static bool c_bits(const struct sugg_ctx *sx, struct change *c, double v)
{
    const struct gm_job *j = sx->job;
    if (j->mode == GM_EST_TRAIN || quantisable(j) || j->numerics.weight_format == GM_WEIGHTS_QUANT)
        return false; /* a model with a layout gets the weight formats instead */
    if (j->numerics.weight_format == GM_WEIGHTS_BITS && j->numerics.weight_bits <= v)
        return false;
    put_number(c, EST_SET_BITS, v);
    return true;
}

static bool c_bits8(const struct sugg_ctx *sx, struct change *c)
{
    return c_bits(sx, c, 8);
}

static bool c_bits4(const struct sugg_ctx *sx, struct change *c)
{
    return c_bits(sx, c, 4.5);
}

/* The largest value of a search, when it is below what the job asks for. */
static bool searched(const struct sugg_ctx *sx, enum gm_search what, uint64_t now,
                     enum est_setting id, struct change *c)
{
    struct gm_est_search r;
    struct gm_estimate *e = sx->scratch; /* reused by the search */
    if (gm_estimate_search(sx->job, what, &r, &e, NULL) != GM_OK || !r.value || r.value >= now)
        return false;
    put_u64(c, id, r.value);
    return true;
}

static bool c_fewer_seqs(const struct sugg_ctx *sx, struct change *c)
{
    const struct gm_job *j = sx->job;
    if (j->mode != GM_EST_INFER || j->workload.batch <= 1)
        return false;
    return searched(sx, GM_SEARCH_BATCH, j->workload.batch, EST_SET_BATCH, c);
}

static bool c_shorter(const struct sugg_ctx *sx, struct change *c)
{
    const struct gm_job *j = sx->job;
    if (j->mode == GM_EST_WEIGHTS || (j->mode == GM_EST_INFER && j->engine.kind == GM_ENGINE_VLLM))
        return false;
    if (j->mode == GM_EST_TRAIN)
        return searched(sx, GM_SEARCH_CONTEXT, j->workload.seq, EST_SET_SEQ, c);
    return searched(sx, GM_SEARCH_CONTEXT, j->workload.context, EST_SET_CONTEXT, c);
}

static bool c_max_model_len(const struct sugg_ctx *sx, struct change *c)
{
    const struct gm_job *j = sx->job;
    if (j->mode != GM_EST_INFER || j->engine.kind != GM_ENGINE_VLLM)
        return false;
    return searched(sx, GM_SEARCH_MAX_MODEL_LEN, sx->base->serving.max_model_len,
                    EST_SET_MAX_MODEL_LEN, c);
}

static bool c_utilization(const struct sugg_ctx *sx, struct change *c)
{
    const struct gm_job *j = sx->job;
    if (j->mode != GM_EST_INFER || j->engine.kind != GM_ENGINE_VLLM ||
        j->engine.vllm.gpu_memory_utilization >= 0.95)
        return false;
    put_number(c, EST_SET_GPU_MEMORY_UTILIZATION, 0.95);
    return true;
}

/* More tensor parallelism for serving: the smallest degree (2, 4, 8) that fits. */
static bool c_more_tp(const struct sugg_ctx *sx, struct change *c)
{
    const struct gm_job *j = sx->job;
    const struct gm_model *m = j->model.model;
    uint64_t replicas = data_parallel(j), pick = 0;
    if (j->mode != GM_EST_INFER || j->engine.kind == GM_ENGINE_LLAMACPP || !m || !m->n_heads ||
        !m->n_kv_heads)
        return false;
    for (uint64_t t = j->parallel.tp * 2; t <= 8; t *= 2) {
        struct change tc = {0};
        struct gm_job a;
        if (!est_tp_divides(m, t))
            continue;
        put_u64(&tc, EST_SET_TP, t);
        put_u64(&tc, EST_SET_GPUS, t * replicas);
        if (!apply(j, &tc, &a) || est_rerun(&a, sx->scratch, NULL) != GM_OK)
            continue;
        pick = t;
        if (sx->scratch->fit.fits)
            break;
    }
    if (!pick)
        return false;
    put_u64(c, EST_SET_TP, pick);
    put_u64(c, EST_SET_GPUS, pick * replicas);
    return true;
}

/* The smallest catalog GPU, larger than the one given, on which the job fits. */
static bool c_larger_gpu(const struct sugg_ctx *sx, struct change *c)
{
    const struct gm_job *j = sx->job;
    size_t idx[GM_EST_MAX_CATALOG], n = est_gpus_by_size(idx, GM_EST_MAX_CATALOG);
    for (size_t i = 0; i < n; i++) {
        const struct gm_gpu *g = gm_gpu_catalog_get(idx[i]);
        struct change t = {0};
        struct gm_job a;
        if (g->memory_bytes <= j->gpu.memory_bytes)
            continue;
        put_text(&t, EST_SET_GPU, g->name);
        t.has_unset = true;
        t.unset = EST_SET_GPU_MEMORY;
        if (apply(j, &t, &a) && est_rerun(&a, sx->scratch, NULL) == GM_OK &&
            sx->scratch->fit.fits) {
            *c = t;
            return true;
        }
    }
    return false;
}

static const struct candidate {
    bool (*make)(const struct sugg_ctx *sx, struct change *c);
    enum gm_sugg_cost cost;
    const char *trade;
    bool combine; /* may take part in a combination */
} candidates[] = {
    {c_sdpa, GM_COST_NONE, "same result from SDPA/flash attention kernels", true},
    {c_fused, GM_COST_NONE, "the same update in one fused kernel", true},
    {c_flash_attn, GM_COST_NONE, "the same result without materialised attention scores", true},
    {c_loss_fused_linear, GM_COST_NONE,
     "the same loss from a fused linear cross-entropy kernel (Liger, Cut Cross-Entropy): the "
     "logits are never materialised",
     true},
    {c_loss_chunked, GM_COST_NONE,
     "the same loss one chunk of the sequence at a time (torchtune's chunked cross-entropy)", true},
    {c_fused_kernels, GM_COST_NONE, "the same layers from fused kernels (Liger-Kernel)", true},
    {c_optimizer_in_backward, GM_COST_NONE,
     "each parameter stepped as its gradient is ready: no gradient clipping or accumulation", true},
    {c_ckpt_op, GM_COST_SPEED,
     "recomputes every other matmul and the pointwise ops in backward (torchtitan op-level "
     "checkpointing)",
     true},
    {c_ckpt_selective, GM_COST_SPEED, "recomputes the attention scores during backward", true},
    {c_ckpt_full, GM_COST_SPEED,
     "recomputes every layer's forward during backward (about one more forward pass)", true},
    {c_micro_batch, GM_COST_SPEED,
     "same tokens per optimizer step through gradient accumulation: more, smaller steps", true},
    {c_paged, GM_COST_SPEED,
     "optimizer state pages to host memory when the GPU is full: slower steps", true},
    {c_activation_offload, GM_COST_SPEED,
     "saved activations in pinned host memory (host-device copies, host memory)", true},
    {c_zero1, GM_COST_SPEED, "optimizer state sharded over the data-parallel GPUs", true},
    {c_zero2, GM_COST_SPEED, "optimizer state and gradients sharded over the data-parallel GPUs",
     true},
    {c_zero3, GM_COST_SPEED,
     "parameters, gradients and optimizer state sharded; layers gathered as they run (more "
     "communication)",
     true},
    {c_fsdp, GM_COST_SPEED,
     "PyTorch FSDP: everything sharded, one decoder layer gathered at a time (more "
     "communication)",
     true},
    {c_offload_optimizer, GM_COST_SPEED,
     "optimizer state and step on the CPU (ZeRO-Offload): slower steps, host memory", true},
    {c_offload_params, GM_COST_SPEED,
     "parameters and optimizer state on the CPU (ZeRO-Infinity): much slower steps", true},
    {c_utilization, GM_COST_NONE,
     "less headroom for other processes and for what vLLM does not profile", true},
    {c_adamw_8bit, GM_COST_NUMERICS,
     "8-bit optimizer state (bitsandbytes); training usually matches 32-bit AdamW", true},
    {c_pure_bf16, GM_COST_NUMERICS,
     "pure bf16, no fp32 master weights: small updates are lost (changes the numerics)", true},
    {c_kv_fp8, GM_COST_NUMERICS, "8-bit KV cache: half the bytes, a small accuracy loss", true},
    {c_lora, GM_COST_QUALITY, "trains low-rank adapters only; quality can trail a full fine-tune",
     true},
    {c_qlora, GM_COST_QUALITY,
     "adapters on a 4-bit (NF4) frozen base: lower-precision base, slower matmuls", true},
    {c_bits8, GM_COST_QUALITY, "8-bit weights (int8 / fp8 quantisation)", true},
    {c_bits4, GM_COST_QUALITY, "4-bit weights with scales (GPTQ / AWQ / NF4): some quality loss",
     true},
    /* ---- weight formats (bitsandbytes, GPTQ, AWQ, FP8) ---- */
    {c_quant_fp8, GM_COST_QUALITY,
     "FP8 weights (an FP8 checkpoint, or vLLM --quantization fp8): near-lossless; fast FP8 "
     "kernels need Ada or Hopper GPUs",
     true},
    {c_quant_awq, GM_COST_QUALITY,
     "a 4-bit AWQ checkpoint (embeddings and lm_head stay 16-bit): some quality loss", true},
    {c_quant_gptq, GM_COST_QUALITY,
     "a 4-bit GPTQ checkpoint (groups of 128): some quality loss, calibrated per model", true},
    {c_quant_nf4, GM_COST_QUALITY,
     "bitsandbytes NF4 at load time (no quantised checkpoint needed): quality loss, slower "
     "matmuls",
     true},
    {c_fewer_seqs, GM_COST_WORKLOAD, "fewer sequences at once: lower throughput", false},
    {c_max_model_len, GM_COST_WORKLOAD, "requests longer than this are refused", true},
    {c_shorter, GM_COST_WORKLOAD, "shorter sequences than asked for", false},
    {c_more_tp, GM_COST_HARDWARE, "more GPUs per model replica (tensor parallel)", true},
    {c_larger_gpu, GM_COST_HARDWARE, "a larger GPU", false},
};

#define N_CANDIDATES (sizeof(candidates) / sizeof(candidates[0]))

static void change_text(const struct change *c, char *out, size_t n)
{
    size_t len = strlen(out);
    for (size_t i = 0; i < c->n && len + 1 < n; i++) {
        char value[48];
        est_setting_value_text(c->set[i].id, &c->set[i].v, value, sizeof value);
        snprintf(out + len, n - len, "%s--%s%s%s", len ? " " : "", est_setting(c->set[i].id)->name,
                 value[0] ? " " : "", value);
        len = strlen(out);
    }
}

/* How far from fitting: 0 when it fits. */
static uint64_t distance(const struct gm_estimate *e)
{
    return e->fit.fits ? 0 : (e->fit.shortfall_bytes ? e->fit.shortfall_bytes : 1);
}

static bool better(const struct gm_est_suggestion *a, uint64_t da,
                   const struct gm_est_suggestion *b, uint64_t db)
{
    if (a->fits != b->fits)
        return a->fits;
    if (a->fits) {
        /* cheapest first; within a cost, the mildest change that fits first */
        if (a->cost != b->cost)
            return a->cost < b->cost;
        if ((a->reason == GM_FIT_FITS_PAGED) != (b->reason == GM_FIT_FITS_PAGED))
            return b->reason == GM_FIT_FITS_PAGED; /* fitting outright beats paging */
        return a->device_bytes > b->device_bytes;
    }
    return da < db;
}

struct tried {
    struct gm_est_suggestion s;
    uint64_t distance;
    struct change c;
    size_t cand;
};

/* The job with the changes made in order; false when one is refused. */
static bool apply_all(const struct gm_job *job, const struct change *c, size_t n, size_t skip,
                      struct gm_job *out)
{
    struct gm_job a;
    *out = *job;
    for (size_t i = 0; i < n; i++) {
        if (i == skip)
            continue;
        if (!apply(out, &c[i], &a))
            return false;
        *out = a;
    }
    return true;
}

/* Greedy combination: add the change that brings the job closest to fitting until it
 * fits, then drop what it can do without.  Returns true with *out when it fits. */
static bool combine(const struct sugg_ctx *sx, struct gm_est_suggestion *out)
{
    struct change applied[8];
    size_t from[8], n_applied = 0;
    bool used[N_CANDIDATES] = {false};
    struct gm_job cur = *sx->job, a;
    uint64_t cur_dist = distance(sx->base);

    while (cur_dist > 0 && n_applied < sizeof applied / sizeof applied[0]) {
        size_t best = N_CANDIDATES;
        uint64_t best_dist = cur_dist;
        struct change best_c = {0};
        struct sugg_ctx cx = *sx;
        cx.job = &cur;
        for (size_t i = 0; i < N_CANDIDATES; i++) {
            struct change c = {0};
            uint64_t d;
            if (used[i] || !candidates[i].combine || !candidates[i].make(&cx, &c) ||
                !apply(&cur, &c, &a) || est_rerun(&a, sx->scratch, NULL) != GM_OK)
                continue;
            d = distance(sx->scratch);
            if (d < best_dist ||
                (d == 0 && best_dist == 0 && candidates[i].cost < candidates[best].cost)) {
                best = i;
                best_dist = d;
                best_c = c;
            }
        }
        if (best == N_CANDIDATES || !apply(&cur, &best_c, &a))
            return false;
        used[best] = true;
        from[n_applied] = best;
        applied[n_applied++] = best_c;
        cur = a;
        cur_dist = best_dist;
    }
    if (cur_dist > 0)
        return false;
    /* drop what the combination can do without, the latest additions first */
    for (size_t k = n_applied; k-- > 0;) {
        struct gm_job t;
        if (n_applied > 1 && apply_all(sx->job, applied, n_applied, k, &t) &&
            est_rerun(&t, sx->scratch, NULL) == GM_OK && sx->scratch->fit.fits) {
            memmove(&applied[k], &applied[k + 1], (n_applied - k - 1) * sizeof applied[0]);
            memmove(&from[k], &from[k + 1], (n_applied - k - 1) * sizeof from[0]);
            n_applied--;
        }
    }
    if (!apply_all(sx->job, applied, n_applied, SIZE_MAX, &cur) ||
        est_rerun(&cur, sx->scratch, NULL) != GM_OK || !sx->scratch->fit.fits)
        return false;
    memset(out, 0, sizeof(*out));
    for (size_t i = 0; i < n_applied; i++) {
        change_text(&applied[i], out->change, sizeof out->change);
        if (candidates[from[i]].cost > out->cost)
            out->cost = candidates[from[i]].cost;
    }
    out->trade = "the costs of each of these changes";
    out->device_bytes = sx->scratch->fit.device_bytes;
    out->fits = true;
    out->reason = sx->scratch->fit.reason;
    out->combined = true;
    return true;
}

enum gm_status gm_estimate_suggest(const struct gm_job *job, const struct gm_estimate *base,
                                   struct gm_est_suggestions *out, struct gm_error *err)
{
    struct tried *tried;
    size_t n_tried = 0;
    uint64_t base_dist = distance(base);
    bool any_fits = false;
    struct sugg_ctx sx;

    memset(out, 0, sizeof(*out));
    if (!job->gpu.memory_bytes || base->fit.fits)
        return GM_OK;
    tried = gm_calloc(MAX_TRIED, sizeof(*tried));
    sx.scratch = est_new();
    out->items = gm_calloc(MAX_LISTED + 1, sizeof(*out->items));
    if (!tried || !sx.scratch || !out->items) {
        gm_free(tried);
        gm_estimate_free(sx.scratch);
        gm_est_suggestions_release(out);
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "out of memory");
    }
    out->cap = MAX_LISTED + 1;
    sx.job = job;
    sx.base = base;
    for (size_t i = 0; i < N_CANDIDATES && n_tried < MAX_TRIED; i++) {
        struct tried *t = &tried[n_tried];
        struct gm_job a;
        memset(t, 0, sizeof(*t));
        if (!candidates[i].make(&sx, &t->c) || !apply(job, &t->c, &a) ||
            est_rerun(&a, sx.scratch, NULL) != GM_OK)
            continue;
        t->distance = distance(sx.scratch);
        if (t->distance >= base_dist)
            continue; /* does not help */
        change_text(&t->c, t->s.change, sizeof t->s.change);
        t->s.trade = candidates[i].trade;
        t->s.cost = candidates[i].cost;
        t->s.device_bytes = sx.scratch->fit.device_bytes;
        t->s.fits = sx.scratch->fit.fits;
        t->s.reason = sx.scratch->fit.reason;
        t->cand = i;
        any_fits = any_fits || t->s.fits;
        n_tried++;
    }
    /* rank: fitting first, cheapest first; then closest to fitting */
    for (size_t i = 1; i < n_tried; i++)
        for (size_t k = i; k > 0 && better(&tried[k].s, tried[k].distance, &tried[k - 1].s,
                                           tried[k - 1].distance);
             k--) {
            struct tried t = tried[k];
            tried[k] = tried[k - 1];
            tried[k - 1] = t;
        }
    /* when some changes fit, those are the answer; else the closest, then a combination */
    for (size_t i = 0; i < n_tried && out->n < MAX_LISTED; i++)
        if (tried[i].s.fits || !any_fits)
            out->items[out->n++] = tried[i].s;
    if (!any_fits) {
        struct gm_est_suggestion s;
        if (combine(&sx, &s))
            out->items[out->n++] = s;
        else
            out->none_fits = true;
    }
    gm_free(tried);
    gm_estimate_free(sx.scratch);
    return GM_OK;
}

void gm_est_suggestions_release(struct gm_est_suggestions *s)
{
    if (!s)
        return;
    gm_free(s->items);
    memset(s, 0, sizeof(*s));
}
