/* SPDX-License-Identifier: MIT */
/* suggest.c - what to change when a job does not fit, as a practitioner would say it.
 *
 * The candidate table below lists the changes people make, each with its rank (what it
 * costs in speed and quality: the same math first, then gradient accumulation and
 * recomputation, sharding, host memory, lower-precision state, fewer trained parameters or
 * quantised weights, less work, more hardware last) and a function that says whether it
 * applies to the job and which settings it changes, as typed values (est_job_put()).  A
 * change the model, the GPU or the stack cannot do is never made: Liger's kernels only for
 * the architectures Liger-Kernel patches, op-level checkpointing only under torchtitan,
 * optimizer-in-backward and activation offloading only under torchtune, ZeRO only under the
 * HF stack (DeepSpeed), FP8 only on GPUs that compute in it, bf16 only from Ampere on.
 *
 * Every change is run through the whole pipeline and judged by the one fit verdict.  When
 * some fit, they are the answer: the GPUs the job has before more, cheapest first, and
 * within one rank the mildest first.  When none fits alone, or only one that costs
 * sharding or more, the cheap ones are combined on the same GPUs (added in rank order until
 * the job fits, then pruned), so that gradient accumulation and checkpointing come before
 * ZeRO-3 with offloads, and "--tp 2 --max-model-len 26176" before "--gpus 8".  When nothing
 * fits, the changes that bring the job closer are listed, closest first; none_fits says
 * that not even a larger catalog GPU does. */
#include "estimate/estimate_int.h"

#include "gpumem/arena.h"

#include <stdio.h>
#include <string.h>

#define MAX_SETS 4

/* Settings one change makes, as typed values by setting id, and those it takes back
 * (--qlora replaces --lora; --fsdp replaces --zero and DeepSpeed's own bucket settings). */
struct change {
    size_t n;
    struct {
        enum est_setting id;
        union gm_job_value v;
    } set[MAX_SETS];
    size_t n_unset;
    enum est_setting unset[3];
    const char *trade; /* in place of the candidate's phrase, or NULL; static storage */
};

struct sugg_ctx {
    const struct gm_job *job;
    const struct gm_estimate *base;
    struct gm_estimate *scratch; /* any candidate may run estimates in it */
    const uint64_t *alone;       /* per candidate: how far from fitting with it alone, or
                                    NOT_APPLIED, NO_HELP */
};

#define NOT_APPLIED (UINT64_MAX - 1) /* the change did not apply to the job as it is */
#define NO_HELP     UINT64_MAX       /* it applied and brought the job no closer */

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

/* A setting of the job that the change takes back (as if never given). */
static void put_unset(struct change *c, enum est_setting id)
{
    if (c->n_unset < sizeof c->unset / sizeof c->unset[0])
        c->unset[c->n_unset++] = id;
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
    for (size_t i = 0; i < c->n_unset; i++)
        est_job_mark(out, c->unset[i], false);
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

/* Whether the job's training stack is one of 'stacks' (flags 1 << enum gm_framework). */
static bool on_stack(const struct gm_job *j, unsigned stacks)
{
    return (stacks >> j->stack.framework) & 1;
}

#define HF         (1u << GM_FRAMEWORK_HF)
#define TORCHTUNE  (1u << GM_FRAMEWORK_TORCHTUNE)
#define TORCHTITAN (1u << GM_FRAMEWORK_TORCHTITAN)
#define MEGATRON   (1u << GM_FRAMEWORK_MEGATRON)

/* Whether the GPU computes in 'sm' x 10 or later (bf16: 80, Ampere; FP8: 89, Ada and Hopper);
 * a GPU given by its memory alone may. */
static bool gpu_runs(const struct gm_job *j, unsigned sm)
{
    return !j->gpu.sm || j->gpu.sm >= sm;
}

/* The architectures Liger-Kernel patches (its RMSNorm, SwiGLU/GeGLU, RoPE and fused linear
 * cross-entropy; linkedin/Liger-Kernel liger_kernel/transformers/monkey_patch.py,
 * MODEL_TYPE_TO_APPLY_LIGER_FN): not GPT-2, GPT-NeoX, Falcon, Phi-2, the encoders, T5 or
 * BART, StarCoder, OLMo 1, Command-R, Qwen2-MoE or DeepSeek-V2. */
static bool liger_patches(const struct gm_model *m)
{
    switch (m->arch) {
    case GM_ARCH_LLAMA:
    case GM_ARCH_MISTRAL:
    case GM_ARCH_MIXTRAL:
    case GM_ARCH_QWEN2:
    case GM_ARCH_QWEN3:
    case GM_ARCH_QWEN3_MOE:
    case GM_ARCH_GEMMA:
    case GM_ARCH_GEMMA2:
    case GM_ARCH_GEMMA3:
    case GM_ARCH_PHI3:
    case GM_ARCH_OLMO2:
    case GM_ARCH_DEEPSEEK_V3:
        return !m->generic;
    default:
        return false;
    }
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
    if (!training_arch(j) || !on_stack(j, MEGATRON) || j->memory.checkpointing != GM_CKPT_NONE ||
        j->memory.attention != GM_ATTN_EAGER)
        return false;
    put_choice(c, EST_SET_GRAD_CHECKPOINTING, GM_CKPT_SELECTIVE);
    return true;
}

static bool c_sdpa(const struct sugg_ctx *sx, struct change *c)
{
    const struct gm_model *m = sx->job->model.model;
    if (sx->job->mode == GM_EST_WEIGHTS || sx->job->memory.attention != GM_ATTN_EAGER)
        return false;
    /* the transformers class has no SDPA path to switch to (T5, gpt-oss) */
    if (m && gm_arch_hf_eager(m->arch) && sx->job->engine.kind != GM_ENGINE_VLLM &&
        sx->job->engine.kind != GM_ENGINE_LLAMACPP && sx->job->engine.kind != GM_ENGINE_SGLANG)
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
    /* torchtune's chunked cross-entropy; Liger's fused linear one under the HF stack, on the
     * models it patches */
    if (to == GM_LOSS_CHUNKED ? !on_stack(j, TORCHTUNE)
                              : !on_stack(j, HF) || !liger_patches(j->model.model))
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
    if (!training_arch(j) || !on_stack(j, HF) || j->memory.fused_kernels == GM_FUSED_ALL ||
        !liger_patches(j->model.model))
        return false;
    put_text(c, EST_SET_FUSED_KERNELS, "liger");
    return true;
}

static bool c_optimizer_in_backward(const struct sugg_ctx *sx, struct change *c)
{
    const struct gm_job *j = sx->job;
    if (!training_arch(j) || !on_stack(j, TORCHTUNE) || j->memory.optimizer_in_backward ||
        j->workload.grad_accum > 1 || j->memory.adapter != GM_ADAPTER_NONE || j->parallel.pp > 1 ||
        j->parallel.offload_optimizer ||
        (j->parallel.shard != GM_SHARD_NONE && j->parallel.shard != GM_SHARD_FSDP))
        return false;
    put_flag(c, EST_SET_OPTIMIZER_IN_BACKWARD);
    return true;
}

static bool c_ckpt_op(const struct sugg_ctx *sx, struct change *c)
{
    const struct gm_job *j = sx->job;
    if (!training_arch(j) || !on_stack(j, TORCHTITAN) || j->memory.checkpointing != GM_CKPT_NONE)
        return false;
    put_choice(c, EST_SET_GRAD_CHECKPOINTING, GM_CKPT_OP);
    return true;
}

static bool c_activation_offload(const struct sugg_ctx *sx, struct change *c)
{
    const struct gm_job *j = sx->job;
    if (!training_arch(j) || !on_stack(j, TORCHTUNE) || j->memory.activation_offload)
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
        if (apply(j, &t, &a) && est_run_verdict(&a, sx->scratch, NULL) == GM_OK &&
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
    if (!training_arch(sx->job) || !on_stack(sx->job, HF | TORCHTUNE) ||
        sx->job->memory.adapter != GM_ADAPTER_NONE)
        return false;
    put_flag(c, EST_SET_LORA);
    return true;
}

static bool c_qlora(const struct sugg_ctx *sx, struct change *c)
{
    if (!training_arch(sx->job) || !on_stack(sx->job, HF | TORCHTUNE) ||
        sx->job->memory.adapter == GM_ADAPTER_QLORA)
        return false;
    put_flag(c, EST_SET_QLORA);
    put_unset(c, EST_SET_LORA);
    return true;
}

/* QLoRA as it is run on one GPU: with every layer checkpointed. */
static bool c_qlora_ckpt(const struct sugg_ctx *sx, struct change *c)
{
    if (sx->job->memory.checkpointing != GM_CKPT_NONE || !c_qlora(sx, c))
        return false;
    put_choice(c, EST_SET_GRAD_CHECKPOINTING, GM_CKPT_FULL);
    return true;
}

static bool c_adamw_8bit(const struct sugg_ctx *sx, struct change *c)
{
    if (!training_arch(sx->job) || !on_stack(sx->job, HF | TORCHTUNE) || !adam(sx->job))
        return false;
    put_choice(c, EST_SET_OPTIMIZER, GM_OPT_ADAMW_8BIT);
    return true;
}

static bool c_paged(const struct sugg_ctx *sx, struct change *c)
{
    const struct gm_job *j = sx->job;
    if (!training_arch(j) || !on_stack(j, HF | TORCHTUNE) || j->memory.paged_optimizer ||
        j->numerics.optimizer == GM_OPT_SGD)
        return false;
    put_flag(c, EST_SET_PAGED_OPTIMIZER);
    return true;
}

static bool c_pure_bf16(const struct sugg_ctx *sx, struct change *c)
{
    const struct gm_job *j = sx->job;
    if (!training_arch(j) || j->numerics.precision == GM_PREC_BF16 ||
        j->memory.adapter != GM_ADAPTER_NONE || !gpu_runs(j, 80))
        return false;
    put_choice(c, EST_SET_PRECISION, GM_PREC_BF16);
    return true;
}

static bool zero_applies(const struct gm_job *j, enum gm_shard to)
{
    if (!training_arch(j) || j->method == GM_METHOD_DEEPSPEED || data_parallel(j) < 2)
        return false;
    /* DeepSpeed under the HF stack; FSDP wherever PyTorch trains; Megatron's distributed
     * optimizer is ZeRO-1 */
    if (to == GM_SHARD_FSDP ? on_stack(j, MEGATRON)
                            : !on_stack(j, HF) && !(to == GM_SHARD_ZERO1 && on_stack(j, MEGATRON)))
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
    if (!on_stack(sx->job, HF)) /* torchtune and torchtitan shard with fully_shard */
        put_choice(c, EST_SET_FSDP_VERSION, 2);
    put_unset(c, EST_SET_ZERO);
    put_unset(c, EST_SET_ZERO_OVERLAP_COMM);
    put_unset(c, EST_SET_BUCKET_ELEMENTS);
    put_unset(c, EST_SET_ZERO_REUSE_DISTANCE);
    return true;
}

static bool c_offload_optimizer(const struct sugg_ctx *sx, struct change *c)
{
    const struct gm_job *j = sx->job;
    if (!training_arch(j) || !on_stack(j, HF) || j->method == GM_METHOD_DEEPSPEED ||
        j->parallel.offload_optimizer || j->parallel.pp > 1)
        return false;
    if (j->parallel.shard == GM_SHARD_NONE)
        put_choice(c, EST_SET_ZERO, GM_SHARD_ZERO2);
    put_flag(c, EST_SET_OFFLOAD_OPTIMIZER);
    return true;
}

static bool c_offload_params(const struct sugg_ctx *sx, struct change *c)
{
    const struct gm_job *j = sx->job;
    if (!training_arch(j) || !on_stack(j, HF) || j->method == GM_METHOD_DEEPSPEED ||
        j->parallel.offload_params || j->parallel.pp > 1)
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
        kv == GM_DTYPE_I8 || (j->engine.kind != GM_ENGINE_LLAMACPP && !gpu_runs(j, 89)))
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
    if (!gpu_runs(sx->job, 89))
        return false;
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
    if (est_search(sx->job, what, &r, sx->scratch, false, NULL) != GM_OK || !r.value ||
        r.value >= now)
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
        if (!apply(j, &tc, &a) || est_run_verdict(&a, sx->scratch, NULL) != GM_OK)
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

/* The smallest catalog GPU, larger than the one given, on which the job fits.  It has the
 * catalog's total: a total given with --gpu was that GPU's (set_gpu()), so it is taken back,
 * and the GPU given is not offered again at its catalog total. */
static bool c_larger_gpu(const struct sugg_ctx *sx, struct change *c)
{
    const struct gm_job *j = sx->job;
    size_t idx[GM_EST_MAX_CATALOG], n = est_gpus_by_size(idx, GM_EST_MAX_CATALOG);
    for (size_t i = 0; i < n; i++) {
        const struct gm_gpu *g = gm_gpu_catalog_get(idx[i]);
        struct change t = {0};
        struct gm_job a;
        if (g->memory_bytes <= j->gpu.memory_bytes || g->memory_bytes <= j->gpu.catalog_bytes)
            continue;
        put_text(&t, EST_SET_GPU, g->name);
        put_unset(&t, EST_SET_GPU_MEMORY);
        if (est_given(j, EST_SET_GPU_MEMORY))
            t.trade = "a larger GPU, at its own total (without --gpu-memory)";
        if (apply(j, &t, &a) && est_run_verdict(&a, sx->scratch, NULL) == GM_OK &&
            sx->scratch->fit.fits) {
            *c = t;
            return true;
        }
    }
    return false;
}

/* llama.cpp: the fewest layers whose experts (--n-cpu-moe) or whose whole weights (-ngl: the
 * most layers left on the GPU) go to host memory for the job to fit; bisection over the
 * layers. */
static bool llamacpp_host(const struct sugg_ctx *sx, struct change *c, enum est_setting id)
{
    const struct gm_job *j = sx->job;
    const struct gm_model *m = j->model.model;
    uint64_t lo = 0, hi, L = m ? m->n_layers : 0;
    bool moe = id == EST_SET_N_CPU_MOE;
    struct change t = {0};
    struct gm_job a;
    if (j->mode != GM_EST_INFER || j->engine.kind != GM_ENGINE_LLAMACPP || L < 2 ||
        (moe ? !m->n_experts || j->engine.llamacpp.n_cpu_moe : j->engine.llamacpp.n_gpu_layers < L))
        return false;
    /* 'lo' layers to host memory do not make it fit, 'hi' do (-ngl keeps L - hi) */
    hi = moe ? L : L - 1;
    put_u64(&t, id, moe ? hi : L - hi);
    if (!apply(j, &t, &a) || est_run_verdict(&a, sx->scratch, NULL) != GM_OK ||
        !sx->scratch->fit.fits)
        return false;
    while (hi - lo > 1) {
        uint64_t mid = lo + (hi - lo) / 2;
        memset(&t, 0, sizeof t);
        put_u64(&t, id, moe ? mid : L - mid);
        if (apply(j, &t, &a) && est_run_verdict(&a, sx->scratch, NULL) == GM_OK &&
            sx->scratch->fit.fits)
            hi = mid;
        else
            lo = mid;
    }
    put_u64(c, id, moe ? hi : L - hi);
    return true;
}

static bool c_n_cpu_moe(const struct sugg_ctx *sx, struct change *c)
{
    return llamacpp_host(sx, c, EST_SET_N_CPU_MOE);
}

static bool c_gpu_layers(const struct sugg_ctx *sx, struct change *c)
{
    return llamacpp_host(sx, c, EST_SET_N_GPU_LAYERS);
}

/* More tensor parallelism on the GPUs the job has: fewer copies of the model, each over
 * twice the GPUs (a sharding engine serving --replicas copies). */
static bool c_tp_same_gpus(const struct sugg_ctx *sx, struct change *c)
{
    const struct gm_job *j = sx->job;
    const struct gm_model *m = j->model.model;
    uint64_t copies = data_parallel(j);
    if (!est_engine_shards(j) || copies < 2 || copies % 2 || !m ||
        !est_tp_divides(m, j->parallel.tp * 2))
        return false;
    put_u64(c, EST_SET_TP, j->parallel.tp * 2);
    put_u64(c, EST_SET_REPLICAS, copies / 2);
    return true;
}

/* The changes, cheapest first by 'rank': what each costs in speed and quality (same math
 * before recomputation, recomputation before sharding, sharding before host memory, numerics
 * before quality, the workload and more hardware last).  'hardware' changes ask for GPUs the
 * job does not have. */
enum {
    RANK_PURE_BF16 = 40,  /* the dearest change a training job's combination takes */
    RANK_FITS_PAGED = 47, /* after the optimizer on the CPU, before layers on the CPU */
};
static const struct candidate {
    bool (*make)(const struct sugg_ctx *sx, struct change *c);
    enum gm_sugg_cost cost;
    unsigned rank;
    bool hardware;
    const char *trade; /* one short phrase */
} candidates[] = {
    {c_sdpa, GM_COST_NONE, 0, false, "same result from SDPA / flash attention"},
    {c_fused, GM_COST_NONE, 0, false, "the same update in one fused kernel"},
    {c_flash_attn, GM_COST_NONE, 0, false, "same result, flash attention (-fa)"},
    {c_loss_fused_linear, GM_COST_NONE, 1, false, "same loss, logits never materialised (Liger)"},
    {c_loss_chunked, GM_COST_NONE, 1, false, "same loss, one chunk at a time (torchtune)"},
    {c_fused_kernels, GM_COST_NONE, 1, false, "same layers, Liger's fused kernels"},
    {c_max_model_len, GM_COST_WORKLOAD, 2, false, "longer requests are refused"},
    {c_utilization, GM_COST_NONE, 3, false, "less headroom for other processes"},
    {c_micro_batch, GM_COST_SPEED, 5, false, "same tokens per step by gradient accumulation"},
    {c_tp_same_gpus, GM_COST_SPEED, 6, false, "fewer copies, each over more of the GPUs"},
    {c_optimizer_in_backward, GM_COST_NONE, 8, false, "steps in backward: no clipping, no accum."},
    {c_ckpt_selective, GM_COST_SPEED, 10, false, "recomputes attention scores in backward"},
    {c_ckpt_op, GM_COST_SPEED, 12, false, "recomputes every other matmul (torchtitan)"},
    {c_ckpt_full, GM_COST_SPEED, 15, false, "recomputes each layer in backward (~1 more forward)"},
    {c_zero1, GM_COST_SPEED, 20, false, "optimizer state sharded over the GPUs"},
    {c_zero2, GM_COST_SPEED, 22, false, "optimizer state and gradients sharded"},
    {c_zero3, GM_COST_SPEED, 25, false, "everything sharded, layers gathered as they run"},
    {c_fsdp, GM_COST_SPEED, 25, false, "everything sharded (FSDP), layers gathered as they run"},
    {c_paged, GM_COST_SPEED, 30, false, "the state past the GPU crosses PCIe every step"},
    {c_activation_offload, GM_COST_SPEED, 32, false, "activations in host memory (PCIe traffic)"},
    {c_adamw_8bit, GM_COST_NUMERICS, 35, false, "8-bit optimizer state (bitsandbytes)"},
    {c_kv_fp8, GM_COST_NUMERICS, 38, false, "8-bit KV cache: a small accuracy loss"},
    {c_pure_bf16, GM_COST_NUMERICS, RANK_PURE_BF16, false,
     "no fp32 master weights: numerics change"},
    {c_offload_optimizer, GM_COST_SPEED, 45, false, "optimizer on the CPU: slower steps"},
    /* RANK_FITS_PAGED (47): any change that fits only by paging sits here */
    {c_n_cpu_moe, GM_COST_SPEED, 46, false, "experts of the first layers run on the CPU"},
    {c_gpu_layers, GM_COST_SPEED, 48, false, "the other layers run on the CPU: much slower"},
    {c_offload_params, GM_COST_SPEED, 50, false, "parameters on the CPU too: much slower"},
    {c_quant_fp8, GM_COST_QUALITY, 55, false, "FP8 weights: near-lossless"},
    {c_lora, GM_COST_QUALITY, 60, false, "adapters only: can trail a full fine-tune"},
    {c_qlora, GM_COST_QUALITY, 65, false, "adapters on a 4-bit base: quality, speed"},
    {c_qlora_ckpt, GM_COST_QUALITY, 66, false, "QLoRA with recomputation: quality, speed"},
    {c_bits8, GM_COST_QUALITY, 65, false, "8-bit weights"},
    {c_quant_awq, GM_COST_QUALITY, 70, false, "4-bit AWQ checkpoint: some quality loss"},
    {c_quant_gptq, GM_COST_QUALITY, 70, false, "4-bit GPTQ checkpoint: some quality loss"},
    {c_quant_nf4, GM_COST_QUALITY, 72, false, "4-bit NF4 at load time: quality, speed"},
    {c_bits4, GM_COST_QUALITY, 72, false, "4-bit weights: some quality loss"},
    {c_fewer_seqs, GM_COST_WORKLOAD, 80, false, "fewer sequences at once"},
    {c_shorter, GM_COST_WORKLOAD, 82, false, "shorter sequences than asked for"},
    {c_more_tp, GM_COST_HARDWARE, 90, true, "more GPUs (tensor parallel)"},
    {c_larger_gpu, GM_COST_HARDWARE, 95, true, "a larger GPU"},
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

/* How far from fitting: 0 when it fits.  An engine that refuses to start with its
 * max_model_len is as far as the job's own requests (batch x (context + new tokens)) are
 * from its pool: the max_model_len is a change of its own. */
static uint64_t distance(const struct gm_job *j, const struct gm_estimate *e)
{
    if (e->fit.fits)
        return 0;
    if (e->fit.reason == GM_FIT_ENGINE_NO_START) {
        uint64_t want = gm_mul_sat(j->workload.batch, j->workload.context + j->workload.new_tokens);
        return want > e->serving.kv_tokens
                   ? gm_mul_sat(want - e->serving.kv_tokens, e->serving.kv_bytes_per_token)
                   : 1;
    }
    return e->fit.shortfall_bytes ? e->fit.shortfall_bytes : 1;
}

struct tried {
    struct gm_est_suggestion s;
    uint64_t distance;
    unsigned rank;
    bool hardware;
    struct change c;
    size_t cand;
};

/* Fitting first; among those, the GPUs the job has before more, then the cheapest (fitting
 * outright before paging, the mildest change of one rank first); the rest closest first. */
static bool better(const struct tried *a, const struct tried *b)
{
    if (a->s.fits != b->s.fits)
        return a->s.fits;
    if (a->s.fits) {
        if (a->hardware != b->hardware)
            return !a->hardware;
        if (a->rank != b->rank)
            return a->rank < b->rank;
        if ((a->s.reason == GM_FIT_FITS_PAGED) != (b->s.reason == GM_FIT_FITS_PAGED))
            return b->s.reason == GM_FIT_FITS_PAGED;
        return a->s.device_bytes > b->s.device_bytes;
    }
    return a->distance < b->distance;
}

/* The job with the changes made in order, those kept; false when one is refused. */
static bool apply_kept(const struct gm_job *job, const struct change *c, size_t n, const bool *keep,
                       struct gm_job *out)
{
    struct gm_job a;
    *out = *job;
    for (size_t i = 0; i < n; i++) {
        if (!keep[i])
            continue;
        if (!apply(out, &c[i], &a))
            return false;
        *out = a;
    }
    return true;
}

/* Whether a change may take part in a combination: not more hardware, not less work, not
 * paging (a safety net, not a plan). */
static bool combinable(size_t i)
{
    return !candidates[i].hardware && candidates[i].make != c_shorter &&
           candidates[i].make != c_fewer_seqs && candidates[i].make != c_paged;
}

/* Whether every change that helped alone, made one after another against the job as changed
 * so far, fits the job: the combination search's last chance when the sum of what they save
 * alone says none can (sx->scratch gets the run's figures). */
static bool all_at_once_fits(const struct sugg_ctx *sx, unsigned below)
{
    struct sugg_ctx cx = *sx;
    struct gm_job cur = *sx->job, a;
    cx.job = &cur;
    for (size_t i = 0; i < N_CANDIDATES; i++) {
        struct change c = {0};
        if (!combinable(i) || candidates[i].rank >= below || sx->alone[i] >= NOT_APPLIED ||
            !candidates[i].make(&cx, &c) || !apply(&cur, &c, &a))
            continue;
        cur = a;
    }
    return est_run_verdict(&cur, sx->scratch, NULL) == GM_OK && sx->scratch->fit.fits;
}

/* A combination on the GPUs the job has, cheapest first: the cheapest change that helps is
 * added, made against the job as changed so far, then the cheapest again (a change may unlock
 * a cheaper one: more TP on the same GPUs, then a max_model_len), until the job fits; then
 * every change it can do without is dropped, the dearest first.  Only changes below 'below'
 * in rank take part.  True with *out when it fits. */
static bool combine(const struct sugg_ctx *sx, unsigned below, struct tried *out)
{
    struct change applied[8];
    size_t from[8], n_applied = 0, n_kept = 0;
    bool keep[8];
    uint64_t fit_device, fit_paged;
    enum gm_fit_reason fit_reason;
    /* used: in the combination, or tried in it without helping (not tried again) */
    bool used[N_CANDIDATES] = {false}, progress = true, bounded;
    struct gm_job cur = *sx->job, a;
    uint64_t cur_dist = distance(sx->job, sx->base), base_dist = cur_dist, left = 0;
    bool train = sx->job->mode == GM_EST_TRAIN;

    /* training changes save less together than the sum of what each saves alone (they save
     * the same bytes twice, or another phase then peaks), and what did not apply alone does
     * not apply with them: when the sum of what the changes not yet tried save alone falls
     * short of the distance left, stop (a training run is the costly one; serving changes
     * can unlock others: more TP on the same GPUs, then a max_model_len).  Not a bound when
     * one change grows what another shrinks: accumulation keeps the gradients through the
     * step, so fewer sequences per micro-batch save little alone and much more beside pure
     * bf16, which halves those gradients.  So when the sum falls short (from the start or
     * as changes are tried), every change at once decides, once, whether the search goes on
     * (then without the bound). */
    if (train)
        for (size_t i = 0; i < N_CANDIDATES; i++)
            if (combinable(i) && candidates[i].rank < below && sx->alone[i] < NOT_APPLIED)
                left = gm_add_sat(left, base_dist - sx->alone[i]);
    bounded = train;
    while (cur_dist > 0 && progress && n_applied < sizeof applied / sizeof applied[0]) {
        struct sugg_ctx cx = *sx;
        cx.job = &cur;
        progress = false;
        for (size_t i = 0;
             i < N_CANDIDATES && cur_dist > 0 && n_applied < sizeof applied / sizeof applied[0];
             i++) {
            struct change c = {0};
            uint64_t d;
            /* a change that applied alone without helping is not tried with others (one
             * that did not apply may now); on the job as it is, its result alone is known */
            if (bounded && left < cur_dist) {
                if (!all_at_once_fits(sx, below))
                    return false;
                bounded = false;
            }
            if (used[i] || !combinable(i) || candidates[i].rank >= below ||
                sx->alone[i] == NO_HELP || !candidates[i].make(&cx, &c) || !apply(&cur, &c, &a))
                continue;
            used[i] = true;
            if (bounded && sx->alone[i] < NOT_APPLIED)
                left -= base_dist - sx->alone[i];
            if (n_applied == 0 && sx->alone[i] < NOT_APPLIED)
                d = sx->alone[i];
            else if (est_run_point(&a, sx->scratch, NULL) == GM_OK)
                d = distance(&a, sx->scratch);
            else
                continue;
            if (d >= cur_dist)
                continue; /* does not help from here */
            used[i] = true;
            from[n_applied] = i;
            applied[n_applied++] = c;
            cur = a;
            cx.job = &cur;
            cur_dist = d;
            progress = true;
            i = (size_t)-1; /* the cheapest first again: a change may unlock a cheaper one */
        }
    }
    if (cur_dist > 0 || n_applied < 2)
        return false;
    /* drop what the combination can do without: the free changes (the same math) together,
     * then each other one, the dearest first; the last one added made it fit, so it stays.
     * The figures are those of the last combination that fitted (in scratch now). */
    fit_device = sx->scratch->fit.device_bytes;
    fit_reason = sx->scratch->fit.reason;
    fit_paged = sx->scratch->fit.paged_bytes;
    for (size_t i = 0; i < n_applied; i++)
        keep[i] = true;
    for (int pass = 0; pass < 2; pass++)
        for (size_t k = n_applied - 1; k-- > 0;) {
            struct gm_job t;
            bool was[8];
            if (!keep[k] || (pass == 0) != (candidates[from[k]].rank <= 1))
                continue;
            memcpy(was, keep, sizeof was);
            for (size_t i = 0; i < n_applied; i++)
                if (pass == 0 ? candidates[from[i]].rank <= 1 && i + 1 < n_applied : i == k)
                    keep[i] = false;
            if (apply_kept(sx->job, applied, n_applied, keep, &t) &&
                est_run_verdict(&t, sx->scratch, NULL) == GM_OK && sx->scratch->fit.fits) {
                fit_device = sx->scratch->fit.device_bytes;
                fit_reason = sx->scratch->fit.reason;
                fit_paged = sx->scratch->fit.paged_bytes;
            } else {
                memcpy(keep, was, sizeof was);
            }
            if (pass == 0)
                break; /* the free ones, once, together */
        }
    for (size_t i = 0; i < n_applied; i++)
        n_kept += keep[i];
    if (n_kept < 2)
        return false;
    memset(out, 0, sizeof(*out));
    for (size_t i = 0; i < n_applied; i++) {
        if (!keep[i])
            continue;
        change_text(&applied[i], out->s.change, sizeof out->s.change);
        if (candidates[from[i]].cost > out->s.cost)
            out->s.cost = candidates[from[i]].cost;
        if (candidates[from[i]].rank > out->rank)
            out->rank = candidates[from[i]].rank;
    }
    out->s.trade = "the costs of each change";
    out->s.device_bytes = fit_device;
    out->s.fits = true;
    out->s.reason = fit_reason;
    out->s.paged_bytes = fit_paged;
    out->s.combined = true;
    out->cand = N_CANDIDATES;
    return true;
}

/* A training job's combination takes no change dearer than pure bf16 (its row in the
 * candidates table carries RANK_PURE_BF16, so the bound follows that row). */
#define TRAIN_COMBINE_BELOW (RANK_PURE_BF16 + 1)

/* Whether the search reads how far candidate 'i' alone leaves the job from fitting, when it
 * does not fit: every candidate's when none fits alone (they are the answer, closest first),
 * else those the combination takes part in ('below': its rank bound, 0 when it does not run:
 * the changes that fit are the answer, and those that do not are never shown). */
static bool figures_read(size_t i, bool some_fit, unsigned below)
{
    return !some_fit || (combinable(i) && candidates[i].rank < below);
}

/* Whether the figures of candidate 'i' are seldom read (figures_read(), before it is known
 * whether some change fits): none that can take part in a combination.  Those get the
 * verdict first, the others their figures at once (a verdict first would be a second run). */
static bool figures_seldom_read(const struct gm_job *job, size_t i)
{
    return !combinable(i) ||
           (job->mode == GM_EST_TRAIN && candidates[i].rank >= TRAIN_COMBINE_BELOW);
}

/* Candidate i alone, its figures run (est_run_point()) into sx->scratch: *t and alone[i] as
 * the search reads them; true when it helps (t is kept). */
static bool settle(struct sugg_ctx *sx, size_t i, const struct gm_job *a, uint64_t base_dist,
                   uint64_t *alone, struct tried *t)
{
    if (est_run_point(a, sx->scratch, NULL) != GM_OK)
        return false; /* alone[i] stays NOT_APPLIED */
    t->distance = distance(a, sx->scratch);
    alone[i] = NO_HELP;
    if (t->distance >= base_dist)
        return false; /* does not help */
    alone[i] = t->distance;
    change_text(&t->c, t->s.change, sizeof t->s.change);
    t->s.trade = t->c.trade ? t->c.trade : candidates[i].trade;
    t->s.cost = candidates[i].cost;
    t->s.device_bytes = sx->scratch->fit.device_bytes;
    t->s.fits = sx->scratch->fit.fits;
    t->s.reason = sx->scratch->fit.reason;
    t->s.paged_bytes = sx->scratch->fit.paged_bytes;
    t->rank = candidates[i].rank;
    /* fitting only by paging state to host memory on every step is a fallback, after
     * moving the optimizer to the CPU outright */
    if (t->s.reason == GM_FIT_FITS_PAGED && t->rank < RANK_FITS_PAGED)
        t->rank = RANK_FITS_PAGED;
    t->hardware = candidates[i].hardware;
    t->cand = i;
    return true;
}

enum gm_status est_suggest(const struct gm_job *job, const struct gm_estimate *base,
                           struct est_sugg_probe *probe, struct gm_est_suggestions *out,
                           struct gm_error *err)
{
    struct tried *tried;
    size_t n_tried = 0;
    uint64_t base_dist = distance(job, base), alone[N_CANDIDATES];
    unsigned best_rank = UINT32_MAX, below = 0;
    bool kept[N_CANDIDATES] = {false}, pending[N_CANDIDATES] = {false}, some_fit = false;
    bool settle_all = probe && probe->settle_all;
    struct sugg_ctx sx;

    memset(out, 0, sizeof(*out));
    if (!job->gpu.memory_bytes || base->fit.fits)
        return GM_OK;
    /* one per candidate, in the table's order, and the combination */
    tried = gm_calloc(N_CANDIDATES + 1, sizeof(*tried));
    sx.scratch = est_new();
    if (!tried || !sx.scratch) {
        gm_free(tried);
        gm_estimate_free(sx.scratch);
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "out of memory");
    }
    sx.job = job;
    sx.base = base;
    sx.alone = alone;
    /* the candidates' replays start from the base's (a larger GPU replays the same job, and
     * loads the same model) */
    est_replay_memo_copy(&sx.scratch->store->replays, base->store->replays);
    est_load_memo_copy(&sx.scratch->store->loads, base->store->loads);
    /* every change alone, on the hardware the job has, then with more.  A change whose
     * figures are seldom read gets the verdict first (est_run_verdict(): a replay at the
     * capacity, which stops at the first request that fails): its figures at once when it
     * fits, else only where the search reads them (figures_read()), once it knows which; far
     * from fitting, they are a replay without the limit, the search's costly part. */
    for (size_t i = 0; i < N_CANDIDATES; i++) {
        struct tried *t = &tried[i];
        struct gm_job a;
        alone[i] = NOT_APPLIED;
        if (!candidates[i].make(&sx, &t->c) || !apply(job, &t->c, &a))
            continue;
        if (!settle_all && figures_seldom_read(job, i) &&
            est_run_verdict(&a, sx.scratch, NULL) == GM_OK && !sx.scratch->fit.fits) {
            pending[i] = true;
            continue;
        }
        if (!(kept[i] = settle(&sx, i, &a, base_dist, alone, t)))
            continue;
        some_fit = some_fit || t->s.fits;
        if (t->s.fits && !t->hardware && t->rank < best_rank)
            best_rank = t->rank;
    }
    /* a cheaper way on the same GPUs: the cheaper changes together, when no change alone fits
     * or only one that costs sharding or more does (in training, none dearer than pure bf16:
     * host memory and adapters are changes of their own; a training run is the costly one) */
    if (best_rank >= 20)
        below = job->mode == GM_EST_TRAIN && best_rank > TRAIN_COMBINE_BELOW ? TRAIN_COMBINE_BELOW
                                                                             : best_rank;
    for (size_t i = 0; i < N_CANDIDATES; i++) {
        struct gm_job a;
        if (pending[i] && figures_read(i, some_fit, below) && apply(job, &tried[i].c, &a))
            kept[i] = settle(&sx, i, &a, base_dist, alone, &tried[i]);
    }
    for (size_t i = 0; i < N_CANDIDATES; i++)
        if (kept[i])
            tried[n_tried++] = tried[i];
    if (below && combine(&sx, below, &tried[n_tried]))
        n_tried++;
    if (probe)
        probe->free_runs = est_step_replay_runs(sx.scratch, true);

    /* rank: fitting first (the GPUs the job has before more), cheapest first; then closest */
    for (size_t i = 1; i < n_tried; i++)
        for (size_t k = i; k > 0 && better(&tried[k], &tried[k - 1]); k--) {
            struct tried t = tried[k];
            tried[k] = tried[k - 1];
            tried[k - 1] = t;
        }
    out->items = gm_calloc(n_tried ? n_tried : 1, sizeof(*out->items));
    if (!out->items) {
        gm_free(tried);
        gm_estimate_free(sx.scratch);
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "out of memory");
    }
    out->cap = n_tried;
    /* when some fit, those are the answer; else the closest ones */
    for (size_t i = 0; i < n_tried; i++)
        if (tried[i].s.fits || !tried[0].s.fits)
            out->items[out->n++] = tried[i].s;
    out->none_fits = !n_tried || !tried[0].s.fits;
    gm_free(tried);
    gm_estimate_free(sx.scratch);
    return GM_OK;
}

enum gm_status gm_estimate_suggest(const struct gm_job *job, const struct gm_estimate *base,
                                   struct gm_est_suggestions *out, struct gm_error *err)
{
    return est_suggest(job, base, NULL, out, err);
}

void gm_est_suggestions_release(struct gm_est_suggestions *s)
{
    if (!s)
        return;
    gm_free(s->items);
    memset(s, 0, sizeof(*s));
}
