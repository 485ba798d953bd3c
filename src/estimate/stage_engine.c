/* SPDX-License-Identifier: MIT */
/* stage_engine.c - the serving engine stage: how vLLM sizes its KV pool, and what
 * llama.cpp allocates.  transformers generate() is the inference stage's accounting.
 *
 * vLLM (vllm-project/vllm, determine_available_memory / determine_num_available_blocks):
 *   budget        = total GPU memory x gpu_memory_utilization
 *   KV pool       = budget - what the version's profiling charges to it, cut to whole blocks
 *                   of 2 x block_size x kv_heads/tp x head_dim x dtype bytes x layers/pp
 *   tokens        = blocks x block_size; concurrency at max_model_len = tokens / max_model_len
 * What is charged depends on the version (--vllm-version, enum vllm_era below): the
 * weights, the profile run's activation peak, the non-torch memory that appears after the
 * baseline snapshot, and depending on where the snapshot is taken the CUDA context and
 * the NCCL buffers, and since 0.21 an estimate of the CUDA-graph pool.  The profile run
 * pushes max_num_batched_tokens tokens through the model once; its peak is modelled per
 * layer (profile_activations: for a dense gated MLP, vLLM's LlamaMLP keeping gate+up alive
 * beside the activation, the down_proj output, the layer input and the residual), or the
 * sampler of max_num_seqs sequences after it (a top-k/top-p sort of every logit), whichever
 * is larger; both settings default by version and GPU
 * (est_vllm_batch).  With pipeline parallelism (--pp) every
 * stage holds its layers' weights and KV cache and the larger end (embedding or lm_head); vLLM
 * takes the smallest pool over the workers.  docs/estimate.md, "vLLM", gives the code and commits.
 *
 * llama.cpp (ggml-org/llama.cpp, llama_context / llama_kv_cache): the layers -ngl places on
 * the GPU (the output layer first since PR #18148, last before it) with their KV cache,
 * token_embd in host memory; KV cache = 2 x layers x kv_heads x head_dim x n_ctx at the cache
 * type's ggml size (f16 2 B, q8_0 34 B per 32, q4_0 18 B per 32), window layers capped at
 * n_swa x slots + n_ubatch cells; the compute buffer is the largest set of tensors alive at
 * once in the graph graph_reserve builds for one micro-batch of n_ubatch tokens
 * (est_llamacpp_compute_bytes: attention, MLP, the logits, and a host weight copied in for an
 * offloaded matmul).  docs/estimate.md, "llama.cpp", gives the code it follows. */
#include "estimate/estimate_int.h"

#include "gpumem/alloc.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

/* How a vLLM version budgets its KV cache (docs/estimate.md gives each with its code). */
enum vllm_era {
    VLLM_V0_TORCH_PEAK,    /* before 0.2.5: total x util - torch.cuda.max_memory_allocated() */
    VLLM_V0_GLOBAL,        /* 0.2.5 to 0.3.1 (total - free after the profile run) and 0.6.4
                            * (PR #9352: peak + total - free - allocated): all on the device */
    VLLM_V0_INIT_BASELINE, /* 0.3.2 to 0.6.3 (PR #2863): free memory at init_device, after the
                            * context, less free memory after the profile run */
    VLLM_V0_PROFILED,      /* 0.6.5 to 0.7.x, the V0 engine (PR #10511, #12126): increases
                            * over a baseline snapshot taken before the communicators */
    VLLM_V1_GLOBAL,        /* 0.8 to 0.9.1, the V1 engine (default from 0.8): global formula */
    VLLM_V1_BEFORE_NCCL,   /* 0.9.2 to 0.10 (PR #19312): baseline before NCCL initialises */
    VLLM_V1_AFTER_NCCL,    /* 0.11 to 0.20 (PR #25359): baseline after NCCL initialises */
    VLLM_V1_GRAPHS         /* 0.21 and later: the CUDA-graph pool estimated and charged too */
};

/* The first release of each era, newest first (the boundaries follow the PRs' merge dates). */
static const struct {
    uint32_t from;
    enum vllm_era era;
} vllm_eras[] = {
    {GM_VERSION(0, 21, 0), VLLM_V1_GRAPHS},       {GM_VERSION(0, 11, 0), VLLM_V1_AFTER_NCCL},
    {GM_VERSION(0, 9, 2), VLLM_V1_BEFORE_NCCL},   {GM_VERSION(0, 8, 0), VLLM_V1_GLOBAL},
    {GM_VERSION(0, 6, 5), VLLM_V0_PROFILED},      {GM_VERSION(0, 6, 4), VLLM_V0_GLOBAL},
    {GM_VERSION(0, 3, 2), VLLM_V0_INIT_BASELINE}, {GM_VERSION(0, 2, 5), VLLM_V0_GLOBAL},
};

static enum vllm_era vllm_era(uint32_t v)
{
    if (!v) /* the current release */
        return vllm_eras[0].era;
    for (size_t i = 0; i < sizeof vllm_eras / sizeof vllm_eras[0]; i++)
        if (v >= vllm_eras[i].from)
            return vllm_eras[i].era;
    return VLLM_V0_TORCH_PEAK;
}

/* The V0 engine (before 0.8): the eras are in release order, V1's from VLLM_V1_GLOBAL on */
static bool vllm_era_v0(enum vllm_era e)
{
    return e < VLLM_V1_GLOBAL;
}

/* Whether the version's non-torch figure subtracts PyTorch's allocated bytes, not its reserved
 * ones, after empty_cache(), so the free parts of partly used segments count as non-torch:
 * 0.6.4 (PR #9352's global formula) to 0.6.6 (V0's memory_profiling until PR #11809, 0.7.0);
 * est_vllm_load_cache_gap gives what the load leaves there. */
static bool vllm_counts_load_cache(uint32_t v)
{
    return v >= GM_VERSION(0, 6, 4) && v < GM_VERSION(0, 7, 0);
}

static const char *vllm_era_text(enum vllm_era e)
{
    switch (e) {
    case VLLM_V0_TORCH_PEAK:
        return "budget minus PyTorch's peak allocation alone (the CUDA context, NCCL and other "
               "non-torch memory not charged)";
    case VLLM_V0_GLOBAL:
    case VLLM_V1_GLOBAL:
        return "budget minus everything on the device (CUDA context and NCCL inside it)";
    case VLLM_V0_INIT_BASELINE:
    case VLLM_V0_PROFILED:
    case VLLM_V1_BEFORE_NCCL:
        return "budget minus weights, profile peak and non-torch growth (NCCL inside it, "
               "the CUDA context outside)";
    case VLLM_V1_AFTER_NCCL:
        return "budget minus weights, profile peak and non-torch growth (CUDA context and "
               "start-up NCCL outside it, the profile run's NCCL inside)";
    case VLLM_V1_GRAPHS:
        return "budget minus weights, profile peak, non-torch growth and the estimated "
               "CUDA-graph pool (CUDA context and start-up NCCL outside it, the profile run's "
               "NCCL inside)";
    }
    return "?";
}

static unsigned kv_elem_bytes_x100(enum gm_dtype t)
{
    unsigned bits = gm_dtype_bits(t);
    return bits ? bits * 100 / 8 : 200;
}

/* The KV cache element type of vLLM and SGLang: --kv-dtype, else the model's 16-bit dtype
 * (fp32 for an fp32 model). */
static enum gm_dtype engine_kv_dtype(const struct gm_job *j, const struct gm_model *m)
{
    if (j->numerics.kv_dtype != GM_DTYPE_UNKNOWN)
        return j->numerics.kv_dtype;
    return m->dtype == GM_DTYPE_F32 ? GM_DTYPE_F32 : GM_DTYPE_BF16;
}

/* The total vLLM sizes from (MemorySnapshot.total_memory, torch.cuda.mem_get_info()'s total,
 * which is cudaMemGetInfo's): the catalog GPU's CUDA total where a public printout gives it
 * (a vLLM log or a device-properties listing), else the capacity given (--gpu-memory, which
 * the validation rows take from vLLM's own print) or listed. */
static uint64_t vllm_total_bytes(const struct gm_job *j)
{
    return j->gpu.cuda_bytes ? j->gpu.cuda_bytes : j->gpu.memory_bytes;
}

uint64_t est_engine_sequences(const struct gm_job *j, const struct gm_estimate *e, uint64_t len)
{
    const struct gm_est_serving *sv = &e->serving;
    const struct gm_model *m = j->model.model;
    uint64_t seqs = 0, cap = 0;
    if (!m || !len)
        return 0;
    if (j->engine.kind == GM_ENGINE_VLLM) {
        uint64_t bs = sv->block_size ? sv->block_size : 16, T, n;
        est_vllm_batch(j, sv->max_model_len ? sv->max_model_len : len, &T, &n);
        /* a request takes whole blocks; sliding-window layers hold at most their window */
        uint64_t per = est_vllm_kv_per_token(m, j->parallel.tp, j->parallel.pp,
                                             kv_elem_bytes_x100(engine_kv_dtype(j, m)), len, T, bs);
        uint64_t req = gm_mul_sat(per, est_div_up(len, bs) * bs);
        seqs = req ? sv->kv_pool_bytes / req : 0;
        cap = n;
    } else if (j->engine.kind == GM_ENGINE_SGLANG) {
        seqs = sv->kv_tokens / len;
        cap = j->engine.sglang.max_running_requests;
    }
    return cap && seqs > cap ? cap : seqs;
}

/* The max_model_len vLLM derives from the model when none is given (_get_and_verify_max_len,
 * vllm/config/model.py @ 0052a5b; the same rule in vllm/config.py since the 0.2 releases):
 * max_position_embeddings, times rope_scaling's factor unless the type is "su", "longrope" or
 * "llama3" (whose max_position_embeddings is already the scaled length) or the model type
 * holds "gemma3" ('"gemma3" not in hf_config.model_type': gemma3, gemma3_text, gemma3n;
 * "Gemma3's max_model_len (128K) is already scaled by RoPE scaling"); for "yarn"
 * original_max_position_embeddings times the factor (vLLM reads that key outright,
 * rp["original_max_position_embeddings"]; without it gpumem takes max_position_embeddings and
 * says so, vllm_max_len_assume).  deepseek-coder-6.7b's 16384 positions with linear scaling x4
 * give 65536. */
uint64_t est_vllm_max_len(const struct gm_model *m)
{
    uint64_t len = m->max_positions;
    enum gm_rope_scaling k = m->rope_scaling;
    if (k == GM_ROPE_NONE || k == GM_ROPE_LLAMA3 || k == GM_ROPE_LONGROPE ||
        strstr(m->model_type, "gemma3") || !(m->rope_factor > 0))
        return len;
    if (k == GM_ROPE_YARN && m->rope_original_positions)
        len = m->rope_original_positions;
    return (uint64_t)((double)len * m->rope_factor);
}

/* The longest request the engine serves the model at when no length is given: vLLM's
 * max_model_len (est_vllm_max_len), else the model's max_position_embeddings; 0 when the
 * model gives no positions.  The searches' limit and the inference checks use it. */
uint64_t est_engine_max_len(const struct gm_job *j, const struct gm_model *m)
{
    if (!m)
        return 0;
    return j->engine.kind == GM_ENGINE_VLLM ? est_vllm_max_len(m) : m->max_positions;
}

/* The first release whose OpenAI server turns chunked prefill on by itself above 32768
 * positions: PR #6666 ("Enable chunked prefill by default for long context models", merged
 * 2024-07-23, the day 0.5.3 was tagged; taken from 0.5.4, the first release tagged after it).
 * Before it the V0 scheduler batches max(max_model_len, 2048) tokens whatever the length. */
#define VLLM_AUTO_CHUNKED_PREFILL GM_VERSION(0, 5, 4)

/* vLLM's batch defaults (the profile run pushes max_num_batched_tokens tokens through the
 * model, then samples max_num_seqs sequences).  V0, before 0.8 (vllm/config.py
 * SchedulerConfig.__post_init__ at 0.6.6.post1): max(max_model_len, 2048) tokens, or 2048
 * with chunked prefill, which the OpenAI server turns on above 32768 positions from 0.5.4
 * (VLLM_AUTO_CHUNKED_PREFILL); 256 sequences.  V1, the default engine from 0.8
 * (vllm/engine/arg_utils.py, the OpenAI server's entries): 2048 tokens and 256 sequences, and
 * from 0.9 (PR #17885) 8192 and 1024 on a GPU of 70 GiB or more that is not an A100 (the only
 * sm_80 card that large); max_num_seqs at most max_num_batched_tokens.  Settings given win. */
void est_vllm_batch(const struct gm_job *j, uint64_t max_model_len, uint64_t *tokens,
                    uint64_t *seqs)
{
    const struct gm_job_vllm *v = &j->engine.vllm;
    uint32_t ver = j->stack.vllm;
    uint64_t t, n = 256;
    if (vllm_era_v0(vllm_era(ver))) {
        bool chunked = max_model_len > 32768 && (!ver || ver >= VLLM_AUTO_CHUNKED_PREFILL);
        t = chunked ? 2048 : max_model_len > 2048 ? max_model_len : 2048;
    } else {
        bool big = (!ver || ver >= GM_VERSION(0, 9, 0)) && vllm_total_bytes(j) >= 70 * GM_GIB &&
                   j->gpu.sm != 80;
        t = big ? 8192 : 2048;
        n = big ? 1024 : 256;
    }
    if (v->max_num_batched_tokens)
        t = v->max_num_batched_tokens;
    if (est_given(j, EST_SET_MAX_NUM_SEQS))
        n = v->max_num_seqs;
    else if (n > t)
        n = t;
    *tokens = t;
    *seqs = n;
}

/* The bytes per logit of vLLM's profile-run sampler, by how the version samples.
 * - A sort of every logit (V0, and V1 with PyTorch's top-k/top-p): the profile enables top-k
 *   and top-p so that it sees their memory (V0: vllm/worker/model_runner.py profile_run's
 *   SamplingParams(top_p=0.99, top_k=vocab - 1); V1: gpu_model_runner.py _dummy_sampler_run):
 *   the model's 16-bit logits (2 B), their fp32 copy (4; vllm/v1/sample/sampler.py), the sort of
 *   apply_top_k_top_p (the same code in V0's sampler.py and V1's topk_topp_sampler.py): its
 *   values and int64 indices (12), and inside torch.sort the int64 index input and CUB's
 *   alternate key and value buffers of its pair sort (8 + 12; PyTorch aten/src/ATen/cuda/cub.cuh
 *   segmented_sort_pairs): 38 B.
 * - V1 with FlashInfer's sampler (--flashinfer-sampler): with both top-k and top-p set,
 *   flashinfer_sample calls top_k_top_p_sampling_from_logits (vllm/v1/sample/ops/
 *   topk_topp_sampler.py @ 3babc05), whose default top_k_first order masks the logits into a
 *   new tensor (top_k_mask_logits) and takes their softmax (flashinfer-ai/flashinfer
 *   python/flashinfer/sampling.py @ 8183b93) before its rejection sampling, which sorts
 *   nothing: 16-bit logits 2 + fp32 copy 4 + masked 4 + probabilities 4 = 14 B.
 * - Model runner V2 (vllm/v1/worker/gpu/model_runner.py @ f03f978, _dummy_sampler_run: "During
 *   the initial memory profiling, the sampler may skip top_k, top_p, and logprobs"): its
 *   dummy requests ask for neither, so vllm/v1/worker/gpu/sample/sampler.py @ 0120ce5 copies
 *   the logits to fp32 and draws with gumbel_sample, whose buffers hold one value per 1024
 *   logits: 16-bit logits 2 + fp32 copy 4 = 6 B. */
enum vllm_sampler { SAMPLER_SORT, SAMPLER_FLASHINFER, SAMPLER_V2 };
static const struct {
    unsigned bytes_per_logit;
    const char *what;
} samplers[] = {
    [SAMPLER_SORT] = {38, "top-k/top-p sort"},
    [SAMPLER_FLASHINFER] = {14, "FlashInfer top-k/top-p"},
    [SAMPLER_V2] = {6, "model runner V2 (no top-k/top-p in the profile)"},
};

/* Whether vLLM runs the model runner V2: the default for models that are neither
 * mixture-of-experts nor hybrid from 0.25.1, which added "or not model_config.is_moe" to
 * VllmConfig._is_default_v2_model_runner_model (vllm/config/vllm.py; tenstorrent/vllm-tt-plugin
 * PR #48 reads the change between the two tags; the 0.30 and 0.31 logs of the validation rows
 * print "Using V2 Model Runner" for Qwen2.5).  MoE architectures on V2's own list are not
 * modelled (they stay on V1 here). */
bool est_vllm_runner_v2(const struct gm_job *j, const struct gm_model *m)
{
    uint32_t v = j->stack.vllm;
    return (!v || v >= GM_VERSION(0, 25, 1)) && !m->n_experts && !m->n_linear_layers;
}

static enum vllm_sampler vllm_sampler(const struct gm_job *j, const struct gm_model *m)
{
    uint32_t v = j->stack.vllm;
    if (est_vllm_runner_v2(j, m))
        return SAMPLER_V2;
    if (j->engine.vllm.flashinfer_sampler && !vllm_era_v0(vllm_era(v)))
        return SAMPLER_FLASHINFER;
    return SAMPLER_SORT;
}

unsigned est_vllm_sampler_bytes_per_logit(const struct gm_job *j, const struct gm_model *m)
{
    return samplers[vllm_sampler(j, m)].bytes_per_logit;
}

/* The 16-bit activations of 'tokens' tokens through one layer on one of 't' GPUs (what an
 * engine's profile run or prefill chunk peaks at).  A dense layer with a gated MLP, as vLLM
 * runs it (vllm/model_executor/models/llama.py @ 0035bdf, LlamaMLP.forward: "gate_up, _ =
 * self.gate_up_proj(x); x = self.act_fn(gate_up); x, _ = self.down_proj(x)", the same in
 * Qwen2MLP): the local gate_up keeps the gate+up output alive while down_proj writes its
 * output, beside the layer's input (still the decoder layer's hidden_states) and the residual,
 * so the MLP peaks at 3 x ffn / tp + 3 hidden-sized tensors; the attention at o_proj holds the
 * q/k/v output, the attention output and the same three.  Other layers (mixture of experts,
 * linear attention, an MLP without a gate): the MLP intermediates, the q/k/v output and two
 * hidden-sized tensors. */
static uint64_t profile_activations(const struct gm_model *m, uint64_t tokens, uint64_t t)
{
    struct est_geom g;
    uint64_t per_tok;
    est_geom(m, &g);
    if (m->gated_mlp && !m->n_experts && !m->n_linear_layers) {
        double mlp = 3.0 * g.mlp_max, attn = g.q + g.k + g.v + g.o_in;
        per_tok = (uint64_t)((mlp > attn ? mlp : attn) / (double)t) + 3 * m->hidden;
    } else {
        per_tok = (uint64_t)((g.mlp_max * (m->gated_mlp ? 3 : 2) + g.q + g.k + g.v) / (double)t) +
                  2 * m->hidden;
    }
    return gm_mul_sat(gm_mul_sat(tokens, per_tok), 2);
}

/* Whether vLLM's Marlin kernels can run on the job's GPU: compute capability 8.0 and up
 * (awq_marlin, gptq_marlin: "get_min_capability ... return 80", vllm/model_executor/layers/
 * quantization/awq_marlin.py @ 0322f29; an unknown GPU is taken as one that can). */
static bool vllm_marlin_gpu(const struct est_ctx *cx)
{
    return !cx->job->gpu.sm || cx->job->gpu.sm >= 80;
}

/* vLLM's plain AWQ kernel (AWQLinearMethod.apply, vllm/model_executor/layers/quantization/
 * awq.py @ b82662d): from 256 tokens ("FP16_MATMUL_HEURISTIC_CONDITION = x.shape[:-1].numel()
 * >= 256") it dequantises the layer's whole weight to fp16 (ops.awq_dequantize) for a
 * torch.matmul.  vLLM runs it for an AWQ checkpoint where its Marlin kernel does not (compute
 * capability below 8.0) or where the server was given --quantization awq (its log: "Detected
 * that the model can run with awq_marlin, however you specified quantization=awq explicitly, so
 * forcing awq"): --quant-kernel gemm.  Dense layers only (MoE experts take other methods). */
static bool vllm_awq_plain(const struct est_ctx *cx)
{
    enum gm_quant_kernel k = cx->job->numerics.quant_kernel;
    if (!cx->quant || cx->quant->method != GM_QUANT_AWQ || cx->m->n_experts)
        return false;
    return k == GM_QKERNEL_GEMM || (k == GM_QKERNEL_AUTO && !vllm_marlin_gpu(cx));
}

/* Whether vLLM runs a GPTQ checkpoint through Marlin (gptq_marlin) rather than its plain GPTQ
 * kernel: --quant-kernel marlin, or auto on a GPU Marlin runs on (vllm_marlin_gpu), and weights
 * Marlin takes (GPTQMarlinConfig.is_gptq_marlin_compatible and marlin_utils.
 * check_marlin_supported: (bits, sym) in TYPE_MAP = 4 or 8 bits symmetric, group_size in
 * MARLIN_SUPPORTED_GROUP_SIZES = -1, 32, 64, 128; act-order is supported, not a reason to
 * fall back).  gm_quant does not record GPTQ's `sym` (the qzeros tensor is stored either way),
 * so the weights are taken as symmetric, as the usual GPTQ exports are. */
static bool vllm_gptq_marlin(const struct est_ctx *cx)
{
    enum gm_quant_kernel k = cx->job->numerics.quant_kernel;
    const struct gm_quant *q = cx->quant;
    uint64_t g = q ? q->group_size : 0;
    if (!q || q->method != GM_QUANT_GPTQ || (q->bits != 4 && q->bits != 8) ||
        (g != 0 && g != 32 && g != 64 && g != 128))
        return false;
    return k == GM_QKERNEL_MARLIN || (k == GM_QKERNEL_AUTO && vllm_marlin_gpu(cx));
}

/* Whether the profile run's decoder layers take PyTorch's cuBLAS handle, so the workspace
 * (est_torch_cublas_workspace_bytes) is allocated in the first layer and lives through the
 * forward's peak: 16-bit linears (unquantised weights, or roles the scheme keeps in 16 bit,
 * gm_quant_kept_roles: MXFP4's attention; and a mixture of experts' router, which vLLM builds
 * unquantised under every scheme: MixtralMoE's gate "ReplicatedLinear(..., linear_method=None)",
 * vllm/model_executor/models/mixtral.py @ 005df92, "quant_config=None" in the later MoE models),
 * bitsandbytes (dequantise, then matmul), the plain GPTQ kernel at any size (gptq_gemm hands
 * "at::cuda::getCurrentCUDABlasHandle()" to gemm_half_q_half_cuda on every call, whichever branch
 * then runs, csrc/quantization/gptq/q_gemm.cu @ 6ab6cdd) and plain AWQ from 256 tokens
 * (vllm_awq_plain).  Otherwise (Marlin, FP8 through cutlass, int and FP4 kernels) the first
 * cuBLAS call is the 16-bit lm_head's, after the forward, so the workspace joins the sampler's
 * peak only.  Not modelled: FP8 through the torch._scaled_mm fallback (no cutlass FP8 kernel for
 * the GPU or CUDA build), whose cuBLASLt handle takes the same workspace in the layers. */
static bool vllm_layers_blas(const struct est_ctx *cx, uint64_t tokens)
{
    const struct gm_quant *q = cx->quant;
    unsigned kept = q ? gm_quant_kept_roles(q) : 0;
    if (!q || q->method == GM_QUANT_NONE ||
        (kept & ((1u << GM_ROLE_ATTENTION) | (1u << GM_ROLE_MLP))) ||
        (cx->m && cx->m->n_experts && (kept & (1u << GM_ROLE_ROUTER))))
        return true;
    switch (q->method) {
    case GM_QUANT_BNB_INT8:
    case GM_QUANT_BNB_NF4:
    case GM_QUANT_BNB_FP4:
        return true;
    case GM_QUANT_GPTQ:
        return !vllm_gptq_marlin(cx);
    case GM_QUANT_AWQ:
        return vllm_awq_plain(cx) && tokens >= 256;
    default:
        return false;
    }
}

/* What --quant-kernel means to vLLM, which runs a GPTQ or AWQ checkpoint through Marlin
 * (awq_marlin, gptq_marlin: "get_min_capability ... return 80", vllm/model_executor/layers/
 * quantization/awq_marlin.py @ 0322f29) by itself from compute capability 8.0, or, for AWQ,
 * through its plain kernel (vllm_awq_plain).  auto: as vLLM picks; marlin: Marlin; gemm: AWQ's
 * plain kernel.  exllama, exllamav2 and plain name transformers' kernels (HF generate), which
 * vLLM does not run: refused, as is a kernel for weights that are neither GPTQ nor AWQ, and
 * Marlin where the GPU is below 8.0. */
static enum gm_status vllm_quant_kernel_check(const struct est_ctx *cx, struct gm_error *err)
{
    enum gm_quant_kernel k = cx->job->numerics.quant_kernel;
    const struct gm_quant *q = cx->quant;
    bool gptq = q && q->method == GM_QUANT_GPTQ, awq = q && q->method == GM_QUANT_AWQ;
    if (k == GM_QKERNEL_AUTO)
        return GM_OK;
    if (!gptq && !awq)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "--quant-kernel %s: vLLM picks a kernel of GPTQ or AWQ weights, and "
                       "these are not (%s)",
                       gm_quant_kernel_name(k),
                       q ? gm_quant_method_name(q->method) : "unquantised");
    if (k == GM_QKERNEL_GEMM && !awq)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "--quant-kernel gemm: vLLM's plain kernel of AWQ weights; GPTQ weights take "
                       "auto or marlin");
    if (k != GM_QKERNEL_GEMM && k != GM_QKERNEL_MARLIN)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "--quant-kernel %s: a kernel of HF generate(), not of vLLM; with --engine "
                       "vllm give auto, marlin%s",
                       gm_quant_kernel_name(k), awq ? " or gemm (vLLM's plain AWQ kernel)" : "");
    if (k == GM_QKERNEL_MARLIN && !vllm_marlin_gpu(cx))
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "--quant-kernel marlin: vLLM's Marlin kernels need compute capability 8.0, "
                       "the GPU has %u.%u",
                       cx->job->gpu.sm / 10, cx->job->gpu.sm % 10);
    return GM_OK;
}

/* The columns of the plain AWQ kernel's largest linear on one of 't' GPUs: the fused
 * gate_up_proj (MergedColumnParallelLinear, 2 x ffn / t columns; ffn / t without a gate). */
static uint64_t vllm_awq_widest_cols(const struct gm_model *m, uint64_t t)
{
    return (m->gated_mlp ? 2 : 1) * m->intermediate / t;
}

/* The plain AWQ kernel's peak over 'tokens' tokens on one of 't' GPUs (0 below 256 tokens): at
 * the widest linear (vllm_awq_widest_cols) its dequantised fp16 weight beside the matmul's
 * input, the residual and the output. */
static uint64_t vllm_awq_dequant_peak(const struct gm_model *m, uint64_t tokens, uint64_t t)
{
    uint64_t cols = vllm_awq_widest_cols(m, t);
    if (tokens < 256)
        return 0;
    return gm_mul_sat(
        gm_add_sat(gm_mul_sat(tokens, cols + 2 * m->hidden), gm_mul_sat(m->hidden, cols)), 2);
}

/* The batch sizes vLLM captures CUDA graphs for, by version (count returned, the largest
 * in *largest).  V0 (vllm/worker/model_runner.py, _BATCH_SIZES_TO_CAPTURE at 0.6.6): 1, 2, 4
 * and the multiples of 8 to 256, up to max_num_seqs padded as a batch is (PR #2437;
 * _get_max_graph_batch_size: 1, 2, 4, else up to a multiple of 8, at most 256).  V1 0.8 to 0.9
 * (vllm/config.py SchedulerConfig.cuda_graph_sizes = [512]): 1, 2, 4 and the multiples of 8
 * to 512.  From 0.10 (PR #20628) the top is min(2 x max_num_seqs, 512), the list still
 * "[1, 2, 4] + [i for i in range(8, cuda_graph_sizes[0] + 1, 8)]" (vllm/config.py), so 1, 2
 * and 4 whatever the top; from 0.11 (vllm/config/vllm.py, set_cudagraph_sizes) 1, 2, 4 only up
 * to the top ("i for i in [1, 2, 4] if i <= max_cudagraph_capture_size") and the step 16 from
 * 256 on.  V1 keeps only sizes up to max_num_batched_tokens.  gpt-oss raises the top to 1024
 * with the step 16 from 256 on in every version that serves it (0.10.1 on), whatever
 * max_num_seqs is, unless the sizes are given (GptOssForCausalLMConfig.verify_and_update_config,
 * vllm/model_executor/models/config.py: "Increase the max capture size from 512 to 1024 ...
 * from 67 to 83"; the 0.10.1.1 log of row v028 prints "Overriding max cuda graph capture size
 * to 1024" and 83 sizes 1024, 1008, ..., 272, 256, 248, ..., 8, 4, 2, 1). */
#define VLLM_GRAPH_TOP_GPT_OSS 1024

static uint64_t graph_sizes_upto(const struct gm_job *j, uint64_t tokens, uint64_t seqs,
                                 uint64_t limit, uint64_t *largest)
{
    uint32_t ver = j->stack.vllm;
    const struct gm_model *m = j->model.model;
    bool v0 = vllm_era_v0(vllm_era(ver)), small_always = false;
    bool gpt_oss = !v0 && m && m->arch == GM_ARCH_GPT_OSS;
    bool step16 = !ver || ver >= GM_VERSION(0, 11, 0) || gpt_oss;
    uint64_t top = 512, n = 0, last = 0;
    if (v0) {
        top = seqs <= 2 ? seqs : seqs <= 4 ? 4 : est_div_up(seqs, 8) * 8;
        if (top > 256)
            top = 256;
    } else if (gpt_oss) {
        top = VLLM_GRAPH_TOP_GPT_OSS;
    } else if (!ver || ver >= GM_VERSION(0, 10, 0)) {
        top = 2 * seqs < 512 ? 2 * seqs : 512;
        small_always = ver && ver < GM_VERSION(0, 11, 0);
    }
    for (uint64_t b = 1; b <= VLLM_GRAPH_TOP_GPT_OSS;) {
        bool in = (b <= top || (small_always && b <= 4)) && b <= limit;
        if (in && (v0 || b <= tokens)) {
            n++;
            last = b;
        }
        if (b > top && b >= 4)
            break;
        b = b < 8 ? (b == 4 ? 8 : 2 * b) : b + (step16 && b >= 256 ? 16 : 8);
    }
    *largest = last;
    return n;
}

uint64_t est_vllm_graph_sizes(const struct gm_job *j, uint64_t tokens, uint64_t seqs,
                              uint64_t *largest)
{
    return graph_sizes_upto(j, tokens, seqs, UINT64_MAX, largest);
}

/* The full-model graphs vLLM captures besides (V1) or instead of (V0) piecewise ones.  V0
 * captures one graph of the whole model per size.  V1 from 0.11 defaults to cudagraph_mode
 * FULL_AND_PIECEWISE: piecewise graphs for mixed prefill-decode batches and, for batches of
 * decodes only, one full graph per capture size up to max_num_seqs (the 0.10.2 log of row v039
 * prints "cudagraph_mode":1, PIECEWISE; the 0.11.0 log of v029 "cudagraph_mode":[2,1] and
 * "Capturing CUDA graphs (decode, FULL)" for its 19 sizes up to max_num_seqs 128; 0.13, 0.17
 * and 0.26 logs likewise).  Returns the number of full graphs; 0 before 0.11 in V1. */
uint64_t est_vllm_full_graphs(const struct gm_job *j, uint64_t tokens, uint64_t seqs)
{
    uint32_t ver = j->stack.vllm;
    uint64_t largest;
    if (vllm_era_v0(vllm_era(ver)))
        return est_vllm_graph_sizes(j, tokens, seqs, &largest);
    if ((ver && ver < GM_VERSION(0, 11, 0)) || est_vllm_mla_piecewise_only(j))
        return 0;
    return graph_sizes_upto(j, tokens, seqs, seqs, &largest);
}

/* Whether V1 drops its full decode graphs for the job's attention backend.  The model runner
 * takes the weakest AttentionCGSupport over the backends and, where decode graphs are to be
 * FULL and that support is NEVER, sets cudagraph_mode=PIECEWISE (attention compiled
 * piecewise; _check_and_update_cudagraph_mode, vllm/v1/worker/gpu_model_runner.py in its 0.11
 * form).  An MLA model below compute capability 9.0 runs TRITON_MLA (FlashMLA and FlashAttention
 * MLA need 9.0, CUTLASS and FlashInfer MLA 10.0), whose builder kept MLACommonMetadataBuilder's
 * NEVER until PR #42885 ("MLACommonMetadataBuilder defaults _cudagraph_support to NEVER, which
 * forces PIECEWISE mode"; merged 2026-05-18, TritonMLAMetadataBuilder UNIFORM_BATCH); a 0.16
 * log on an A100 prints "FULL_AND_PIECEWISE is not supported with TritonMLABackend; setting
 * cudagraph_mode=PIECEWISE".  The first release with PR #42885 is not established here: a
 * version given from 0.11 on drops the full graphs (the assumption says so from 0.17), the
 * current default keeps them. */
bool est_vllm_mla_piecewise_only(const struct gm_job *j)
{
    const struct gm_model *m = j->model.model;
    uint32_t ver = j->stack.vllm;
    return m && m->kv_lora_rank && j->gpu.sm && j->gpu.sm < 90 && ver &&
           ver >= GM_VERSION(0, 11, 0) && !vllm_era_v0(vllm_era(ver));
}

/* The CUDA-graph memory of vLLM: every captured size runs the model in pieces split at
 * attention (V1's piecewise graphs, layers + 1 per size) or as one full graph of the same
 * kernels (V0; V1's decode graphs from 0.11, est_vllm_full_graphs), and all graphs share one
 * memory pool, which holds the largest size's intermediates once (graphs are captured largest
 * first).  The driver's memory per captured layer is not a vLLM setting, and a piecewise graph
 * pays its fixed cost once per piece where a full graph pays it once: GRAPH_PIECE_BYTES per
 * layer-piece is set from the two 0.10.1 single-GPU rows of
 * tests/data/validation/vllm_startup_logs.csv (v023, v024: Qwen2.5-7B, 67 sizes x 29 pieces,
 * 0.5 GiB, less the pool), GRAPH_FULL_LAYER_BYTES per layer of a full graph from the one V0
 * row (v011, vLLM 0.6.5, phi-4: 35 sizes x 41 layers, 0.27 GiB, less the pool); both are judged
 * on the other rows (the rows are marked "# fit:" in the table).  The "+ 1": splitting at the
 * n attention ops of n layers leaves n + 1 piecewise graphs (the first also holds the
 * embedding, the last the final norm); a full graph has no pieces, and its + 1 prices the
 * kernels outside the decoder layers (embedding, final norm) as one layer more, an assumption
 * that GRAPH_FULL_LAYER_BYTES was read with (v011's 41 = 40 layers + 1), not a measurement. */
#define GRAPH_PIECE_BYTES      (235 * GM_KIB)
#define GRAPH_FULL_LAYER_BYTES (173 * GM_KIB)

/* The custom all-reduce's max_size: its IPC buffers' size and the largest input it reduces
 * (should_custom_ar: "inp_size < self.max_size"; custom_all_reduce.py). */
#define VLLM_CUSTOM_AR_MAX_SIZE (8 * GM_MIB)

/* ---- the all-reduces inside the graphs (tp >= 2) ----------------------------------------------
 *
 * At tp >= 2 every captured graph of a size holds the model's all-reduces: one after the
 * embedding (VocabParallelEmbedding.forward reduces the masked lookup over the ranks,
 * vllm/model_executor/layers/vocab_parallel_embedding.py) and two per decoder layer, the
 * attention's o_proj and the MLP's down_proj (RowParallelLinear, reduce_results) or the MoE
 * layer's output (FusedMoE.reduce_results): 2 x layers + 1 a size (under a pipeline 2 x the
 * stage's layers, + 1 on the stage with the embedding alone), spread over its pieces (V1
 * splits only at attention, compilation_config.splitting_ops, so vllm.all_reduce stays inside
 * the pieces) or inside its full graph.  Where each runs (CudaCommunicator.all_reduce,
 * vllm/distributed/device_communicators/cuda_communicator.py): the custom all-reduce where it is
 * enabled (tp 2, 4, 6 or 8 with peer access, the group within one node, above 2 over NVLink
 * alone: est_vllm_custom_allreduce_bytes) and the input is under
 * its max_size (should_custom_ar; the input is the size's tokens x hidden, 16-bit), captured on
 * the input's own, later IPC-registered address (CustomAllreduce.capture ->
 * register_graph_buffers, custom_all_reduce.py @ 0ad8064); else pynccl's ncclAllReduce, which
 * NCCL records as a persistent plan, and through the network transport (a group across nodes)
 * with a host callback per collective that posts the proxy's operations at each replay
 * (ncclLaunchPrepare: "We have to launch host tasks to push proxy args", hostStreamPlanCallback,
 * src/enqueue.cc @ NVIDIA/nccl 5d3ab08).  What the driver keeps per captured collective is not
 * read in any code: EST_VLLM_GRAPH_AR_* are the bytes each path adds, read from 0.10.0-0.10.1
 * rows of tests/data/validation/vllm_startup_logs.csv beside the model above (its per-piece
 * bytes fit at tp 1): NCCL within a node from v025/v026 (Qwen2.5-7B tp 2 without peer access,
 * 0.65 GiB: 181 MiB above the tp 1 figure over 67 x 57 all-reduces), NCCL across nodes from v027
 * (the same at one GPU per node, 1.00 GiB: 540 MiB), the custom all-reduce from v071 (Qwen3-32B,
 * tp 8 on H100s, 1.17 GiB: 174 MiB over 67 x 129), these four marked "# fit:" in the CSV (not
 * among the judged rows); judged on v036 and v028.
 */
static const uint64_t vllm_graph_ar_bytes[EST_VLLM_GRAPH_AR_PATHS] = {
    [EST_VLLM_GRAPH_AR_CUSTOM] = 21 * GM_KIB,
    [EST_VLLM_GRAPH_AR_NCCL_NODE] = 49 * GM_KIB,
    [EST_VLLM_GRAPH_AR_NCCL_NET] = 145 * GM_KIB,
};

/* The rows each figure is read from, named by the assumption line. */
static const char *const vllm_graph_ar_fit_on[EST_VLLM_GRAPH_AR_PATHS] = {
    [EST_VLLM_GRAPH_AR_CUSTOM] = "v071",
    [EST_VLLM_GRAPH_AR_NCCL_NODE] = "v025, v026",
    [EST_VLLM_GRAPH_AR_NCCL_NET] = "v027",
};

uint64_t est_vllm_graph_ar_bytes(enum est_vllm_graph_ar path)
{
    return (unsigned)path < EST_VLLM_GRAPH_AR_PATHS ? vllm_graph_ar_bytes[path] : 0;
}

const char *est_vllm_graph_ar_fit_on(enum est_vllm_graph_ar path)
{
    return (unsigned)path < EST_VLLM_GRAPH_AR_PATHS ? vllm_graph_ar_fit_on[path] : "";
}

const char *est_vllm_graph_ar_name(enum est_vllm_graph_ar path)
{
    static const char *const names[EST_VLLM_GRAPH_AR_PATHS] = {
        [EST_VLLM_GRAPH_AR_CUSTOM] = "the custom all-reduce",
        [EST_VLLM_GRAPH_AR_NCCL_NODE] = "NCCL within the node",
        [EST_VLLM_GRAPH_AR_NCCL_NET] = "NCCL across nodes",
    };
    return (unsigned)path < EST_VLLM_GRAPH_AR_PATHS ? names[path] : "unknown";
}

/* The full graphs (est_vllm_full_graphs) of sizes up to 'limit'. */
static uint64_t full_graphs_upto(const struct gm_job *j, uint64_t tokens, uint64_t seqs,
                                 uint64_t limit)
{
    uint32_t ver = j->stack.vllm;
    uint64_t largest;
    if (vllm_era_v0(vllm_era(ver)))
        return graph_sizes_upto(j, tokens, seqs, limit, &largest);
    if ((ver && ver < GM_VERSION(0, 11, 0)) || est_vllm_mla_piecewise_only(j))
        return 0;
    return graph_sizes_upto(j, tokens, seqs, seqs < limit ? seqs : limit, &largest);
}

/* The largest graph size whose all-reduces take the custom all-reduce: its 16-bit input, the
 * size's tokens x hidden, under max_size (should_custom_ar). */
static uint64_t custom_ar_top(const struct gm_model *m)
{
    return m->hidden ? (VLLM_CUSTOM_AR_MAX_SIZE - 1) / (2 * m->hidden) : 0;
}

/* The bytes the all-reduces of ONE graph of 'size' tokens add (est_vllm_graph_allreduces
 * counts them over all sizes). */
static uint64_t graph_ar_one(const struct gm_job *j, uint64_t size, bool custom_ar,
                             bool spans_nodes, bool embedding)
{
    const struct gm_model *m = j->model.model;
    enum est_vllm_graph_ar path;
    if (!m || j->parallel.tp < 2)
        return 0;
    path = custom_ar && size <= custom_ar_top(m) ? EST_VLLM_GRAPH_AR_CUSTOM
           : spans_nodes                         ? EST_VLLM_GRAPH_AR_NCCL_NET
                                                 : EST_VLLM_GRAPH_AR_NCCL_NODE;
    return gm_mul_sat(2 * est_div_up(m->n_layers, j->parallel.pp) + (embedding ? 1 : 0),
                      vllm_graph_ar_bytes[path]);
}

uint64_t est_vllm_graph_allreduces(const struct gm_job *j, uint64_t tokens, uint64_t seqs,
                                   bool custom_ar, bool spans_nodes, bool embedding,
                                   uint64_t n[EST_VLLM_GRAPH_AR_PATHS])
{
    const struct gm_model *m = j->model.model;
    bool v0 = vllm_era_v0(vllm_era(j->stack.vllm));
    uint64_t largest, per_graph, graphs, custom = 0, bytes = 0, under;
    for (unsigned p = 0; p < EST_VLLM_GRAPH_AR_PATHS; p++)
        n[p] = 0;
    if (!m || j->parallel.tp < 2)
        return 0;
    /* the embedding's all-reduce only on the stage that holds it (the first) */
    per_graph = 2 * est_div_up(m->n_layers, j->parallel.pp) + (embedding ? 1 : 0);
    graphs = (v0 ? 0 : est_vllm_graph_sizes(j, tokens, seqs, &largest)) +
             est_vllm_full_graphs(j, tokens, seqs);
    if (custom_ar && m->hidden) {
        /* the largest size whose 16-bit input is under max_size */
        under = custom_ar_top(m);
        custom = (v0 ? 0 : graph_sizes_upto(j, tokens, seqs, under, &largest)) +
                 full_graphs_upto(j, tokens, seqs, under);
    }
    n[EST_VLLM_GRAPH_AR_CUSTOM] = gm_mul_sat(custom, per_graph);
    n[spans_nodes ? EST_VLLM_GRAPH_AR_NCCL_NET : EST_VLLM_GRAPH_AR_NCCL_NODE] =
        gm_mul_sat(graphs - custom, per_graph);
    for (unsigned p = 0; p < EST_VLLM_GRAPH_AR_PATHS; p++)
        bytes = gm_add_sat(bytes, gm_mul_sat(n[p], vllm_graph_ar_bytes[p]));
    return bytes;
}

/* The job's custom all-reduce: its IPC buffers on one GPU, 0 where it is off
 * (CustomAllreduce.__init__: a supported world size, peer access, a group within one node of
 * the resolved layout, "disabled because this process group spans across nodes",
 * custom_all_reduce.py @ 0ad8064, and above two GPUs NVLink; est_vllm_custom_allreduce_bytes),
 * and whether its tensor-parallel group spans nodes.
 * The one place that says whether it is on: the buffers charged and the captured all-reduces
 * priced as custom both ask it. */
static uint64_t vllm_custom_ar(const struct est_ctx *cx, bool *spans_nodes)
{
    uint64_t t = cx->job->parallel.tp;
    *spans_nodes = t > cx->e->layout.gpus_per_node;
    return est_vllm_custom_allreduce_bytes(t, est_node_peers(cx) && !*spans_nodes,
                                           cx->job->gpu.link);
}

/* Whether the stage the estimate describes holds the embedding: the one stage at pp 1; under a
 * pipeline the figures are the stage with the larger end (engine_vllm), the first stage where
 * the embedding is at least the lm_head, else the last. */
static bool vllm_stage_has_embedding(const struct est_ctx *cx)
{
    return cx->job->parallel.pp < 2 || cx->pc.lm_head <= cx->pc.embedding;
}

/* vLLM's own estimate of its CUDA graphs, from 0.21 charged to the budget before the KV pool
 * exists (VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS, default on since 0.21): the V1 runner's
 * profile_cudagraph_memory (vllm/v1/worker/gpu_model_runner.py, in the form vLLM issue #45178
 * quotes; no release commit pinned here) captures, into one fresh temporary pool, the first two
 * descriptors of each mode in the order get_capture_descs gives them
 * (vllm/v1/cudagraph_dispatcher.py: PIECEWISE first, then FULL, each largest first), measures each
 * capture as the drop in the device's free memory, and charges max over the modes of the first
 * capture + per mode (n - 1) x max(second capture, 1 MiB): linear, where the real graphs share one
 * pool (vLLM issue #45178).  Modelled here from the capture model vllm_graph_bytes prices the real
 * graphs with: the first piecewise capture holds the shared pool and the largest size's graph, each
 * later capture only its graph (its intermediates fit in the pool the larger size left); the FULL
 * mode's largest (at most max_num_seqs tokens) fits in the pool PIECEWISE left.  With every graph
 * of a mode priced alike that is the real figure less one full graph, plus the 1 MiB floor where a
 * graph is below it, plus the all-reduce path of the second size where it differs from others'. Not
 * modelled: what else a capture's drop in free memory holds (the FULL mode's first capture runs its
 * attention at long sequence lengths, profile_seq_lens), which may be where v038's 0.15 GiB
 * estimate against 0.11 GiB captured comes from. */
static uint64_t vllm_graph_estimate(const struct est_ctx *cx, uint64_t tokens, uint64_t seqs,
                                    uint64_t pool, uint64_t layers, uint64_t n_pw, uint64_t top,
                                    uint64_t n_full)
{
    const struct gm_job *j = cx->job;
    bool spans, custom = vllm_custom_ar(cx, &spans) != 0, emb = vllm_stage_has_embedding(cx);
    uint64_t pw_bytes = gm_mul_sat(layers, GRAPH_PIECE_BYTES),
             full_bytes = gm_mul_sat(layers, GRAPH_FULL_LAYER_BYTES), first = 0, rest = 0,
             size = top, second, full_top;
    if (n_pw) {
        first = gm_add_sat(gm_add_sat(pool, pw_bytes), graph_ar_one(j, top, custom, spans, emb));
        if (n_pw > 1) {
            graph_sizes_upto(j, tokens, seqs, top - 1, &second);
            size = gm_add_sat(pw_bytes, graph_ar_one(j, second, custom, spans, emb));
            rest = gm_mul_sat(n_pw - 1, size > GM_MIB ? size : GM_MIB);
        }
    }
    if (n_full) {
        graph_sizes_upto(j, tokens, seqs, seqs, &full_top);
        size = gm_add_sat(full_bytes, graph_ar_one(j, full_top, custom, spans, emb));
        if (!n_pw) /* no piecewise capture before it: the pool is this mode's */
            size = gm_add_sat(size, pool);
        if (size > first)
            first = size;
        if (n_full > 1) {
            graph_sizes_upto(j, tokens, seqs, full_top - 1, &second);
            size = gm_add_sat(full_bytes, graph_ar_one(j, second, custom, spans, emb));
            rest = gm_add_sat(rest, gm_mul_sat(n_full - 1, size > GM_MIB ? size : GM_MIB));
        }
    }
    return gm_add_sat(first, rest);
}

/* The CUDA graphs' memory as captured (the capture model below), and in '*charged' what the
 * version's budget pays for them before the KV pool: vLLM's own estimate from 0.21
 * (vllm_graph_estimate), 0 before. */
static uint64_t vllm_graph_bytes(const struct est_ctx *cx, uint64_t tokens, uint64_t seqs,
                                 uint64_t t, uint64_t *sizes, uint64_t *largest, uint64_t *full,
                                 uint64_t ar[EST_VLLM_GRAPH_AR_PATHS], uint64_t *charged)
{
    const struct gm_job *j = cx->job;
    const struct gm_model *m = cx->m;
    uint64_t layers = est_div_up(m->n_layers, j->parallel.pp) + 1, piecewise, pool, ar_bytes;
    bool spans, custom = vllm_custom_ar(cx, &spans) != 0;
    *sizes = est_vllm_graph_sizes(j, tokens, seqs, largest);
    *full = est_vllm_full_graphs(j, tokens, seqs);
    piecewise = vllm_era_v0(vllm_era(j->stack.vllm)) ? 0 : *sizes;
    pool = profile_activations(m, *largest, t);
    if (vllm_awq_plain(cx) && vllm_awq_dequant_peak(m, *largest, t) > pool)
        pool = vllm_awq_dequant_peak(m, *largest, t);
    ar_bytes =
        est_vllm_graph_allreduces(j, tokens, seqs, custom, spans, vllm_stage_has_embedding(cx), ar);
    *charged = vllm_era(j->stack.vllm) == VLLM_V1_GRAPHS
                   ? vllm_graph_estimate(cx, tokens, seqs, pool, layers, piecewise, *largest, *full)
                   : 0;
    return gm_add_sat(
        gm_add_sat(gm_add_sat(gm_mul_sat(gm_mul_sat(piecewise, layers), GRAPH_PIECE_BYTES),
                              gm_mul_sat(gm_mul_sat(*full, layers), GRAPH_FULL_LAYER_BYTES)),
                   pool),
        ar_bytes);
}

/* How the job's GPUs serve it, said once: N GPUs as one copy in tensor parallelism (--gpus
 * with a sharding engine), or as copies (--replicas). */
static void assume_gpus(struct est_ctx *cx)
{
    const struct gm_job *j = cx->job;
    const struct gm_job_parallel *p = &j->parallel;
    uint64_t copies = est_data_parallel(j);
    char stages[48] = "";
    if (p->gpus <= 1 || (!est_given(j, EST_SET_GPUS) && !p->replicas))
        return;
    if (p->pp > 1)
        snprintf(stages, sizeof stages, " and %llu pipeline stages", (unsigned long long)p->pp);
    if (copies <= 1)
        est_assume(cx->e,
                   "%llu GPUs serve one %s instance with tensor parallelism %llu%s (--replicas N "
                   "for N copies of the model)",
                   (unsigned long long)p->gpus, gm_engine_name(j->engine.kind),
                   (unsigned long long)p->tp, stages);
    else
        est_assume(cx->e,
                   "%llu GPUs serve %llu copies of the model, each on %llu GPU%s (tensor "
                   "parallelism %llu): the figures are one GPU's",
                   (unsigned long long)p->gpus, (unsigned long long)copies,
                   (unsigned long long)(p->tp * p->pp), p->tp * p->pp > 1 ? "s" : "",
                   (unsigned long long)p->tp);
}

/* The checks and the shared bookkeeping of the sharding engines (vLLM, SGLang). */
static enum gm_status engine_tp_check(const struct gm_model *m, uint64_t t, struct gm_error *err)
{
    if (!est_tp_divides(m, t))
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "--tp %llu does not divide the %llu attention heads / %llu KV heads",
                       (unsigned long long)t, (unsigned long long)m->n_heads,
                       (unsigned long long)m->n_kv_heads);
    return GM_OK;
}

const char *gm_max_len_from_name(enum gm_max_len_from f)
{
    static const char *const names[] = {"request", "setting", "max_position_embeddings",
                                        "rope_scaling"};
    return (unsigned)f < sizeof names / sizeof names[0] ? names[f] : "unknown";
}

/* The longest request: the engine's own setting, else the longest the engine serves the
 * model at (est_engine_max_len), else the request itself; *from says which. */
static uint64_t engine_len(const struct gm_job *j, const struct gm_model *m, uint64_t given,
                           enum gm_max_len_from *from)
{
    uint64_t len = est_engine_max_len(j, m);
    *from = given                     ? GM_MAX_LEN_GIVEN
            : !len                    ? GM_MAX_LEN_REQUEST
            : len != m->max_positions ? GM_MAX_LEN_ROPE
                                      : GM_MAX_LEN_POSITIONS;
    return given ? given : len ? len : j->workload.context + j->workload.new_tokens;
}

/* The KV pool of 'pool' bytes in whole blocks of 'bs' tokens of 'per_token' bytes. */
static void engine_pool(struct gm_est_serving *sv, uint64_t pool, uint64_t per_token, uint64_t bs)
{
    uint64_t block = per_token * bs;
    sv->kv_bytes_per_token = per_token;
    sv->block_size = bs;
    sv->kv_blocks = block ? pool / block : 0;
    sv->kv_pool_bytes = sv->kv_blocks * block;
    sv->kv_tokens = sv->kv_blocks * bs;
    sv->max_concurrency =
        sv->max_model_len ? (double)sv->kv_tokens / (double)sv->max_model_len : 0.0;
}

/* What vLLM's log prints as "GPU KV cache size: N tokens" (vllm/v1/core/kv_cache_utils.py at
 * 001cabc: _get_kv_cache_groups_uniform_page_size, get_kv_cache_config_from_groups,
 * _report_kv_cache_config).  A model with two attention types (sliding-window or chunked
 * local layers beside full attention) has its layers of each type split into groups of
 * group_size layers: the smaller type's count, or the larger's when that is under 1.5 times
 * the smaller (the last group of a type padded).  The pool is group_size tensors, each shared
 * by one layer of every group, so num_blocks = pool / page / group_size with page = block_size
 * x one layer's bytes per token, and the log prints num_blocks / n_groups x block_size: the
 * tokens as if every layer held every token, while the concurrency line (and 'tokens', the
 * pool in the bytes a request of max_model_len really holds) counts the windows.  From 0.10,
 * the first release whose log the validation rows hold for such a model (gpt-oss, 0.10.1);
 * one stage (--pp 1) and attention layers only (no Mamba or linear-attention state). */
uint64_t est_vllm_tokens_logged(const struct gm_model *m, uint64_t tp, uint64_t pp, unsigned kvb100,
                                uint64_t pool, uint64_t block, uint64_t tokens, uint32_t version)
{
    uint64_t sliding = est_kv_sliding_layers(m), full = est_kv_layers(m) - sliding, lo, hi,
             group_size, groups, k, v, page;
    if (!sliding || m->n_linear_layers || pp > 1 || !block ||
        (version && version < GM_VERSION(0, 10, 0)))
        return tokens;
    if (!full) /* one attention type: one group, every block a request's */
        return tokens;
    lo = full < sliding ? full : sliding;
    hi = full < sliding ? sliding : full;
    group_size = 2 * hi < 3 * lo ? hi : lo;
    groups = est_div_up(full, group_size) + est_div_up(sliding, group_size);
    est_kv_rows(m, EST_KV_VLLM, tp, &k, &v);
    page = (k + v) * kvb100 / 100 * block;
    if (!page)
        return tokens;
    return pool / page / group_size / groups * block;
}

/* Which kernels vLLM runs gpt-oss's MXFP4 MoE experts with (vllm/model_executor/layers/
 * quantization/mxfp4.py, get_mxfp4_backend at 007d500 and afdb4a4): Marlin where its Triton
 * kernels do not run (compute capability below 9.0 or from 11.0) and, in the logs the
 * validation rows hold, on Hopper up to 0.10 (0.10.1 on an H100 prints "Weight-only FP4
 * compression will be used leveraging the Marlin kernel"); OpenAI's triton_kernels on Hopper
 * from 0.11, whose _swizzle_mxfp4 (utils/mxfp4_utils.py) keeps the strided layout with
 * PyTorch below 2.8.1 and swizzles from 2.8.1 on.  'torch' 0 (not given): swizzled, as the
 * llm-d 0.11.0 rows print, though 0.11.0 pins torch 2.8.0.  Blackwell's FlashInfer paths and
 * an unknown GPU: not modelled. */
enum est_mxfp4_backend est_vllm_mxfp4_backend(unsigned sm, uint32_t vllm, uint32_t torch)
{
    if (!sm || (sm >= 100 && sm < 110))
        return EST_MXFP4_NOT_MODELLED;
    if (sm < 90 || sm >= 110 || (vllm && vllm < GM_VERSION(0, 11, 0)))
        return EST_MXFP4_MARLIN;
    return torch && torch < GM_VERSION(2, 8, 1) ? EST_MXFP4_TRITON_STRIDED : EST_MXFP4_TRITON;
}

/* Marlin's layout (mxfp4.py, Mxfp4MoEMethod.create_weights, Mxfp4Backend.MARLIN at 007d500:
 * "the moe marlin kernel requires that for each linear n % 256 == 0 and k % 128 == 0"): every
 * expert's intermediate share (its width / tp) rounded up to 128 and the hidden size to 256,
 * fp4 values and one e8m0 scale per 32 (17/32 byte an element) for gate, up and down. */
static uint64_t marlin_per_expert(uint64_t share, uint64_t h)
{
    uint64_t before = share * h;
    uint64_t after = est_div_up(share, 128) * 128 * (est_div_up(h, 256) * 256);
    return gm_mul_div_u64(3 * (after - before), 17, 32);
}

/* The Triton layout (mxfp4.py @ afdb4a4, Mxfp4MoEMethod): create_weights rounds each expert's
 * intermediate share up to 64; process_weights_after_loading turns the bf16 biases into fp32
 * Parameters and hands values and scales to _swizzle_mxfp4 (utils/mxfp4_utils.py @ 01b817d),
 * then deletes w13_weight and w2_weight but not w13_weight_scale and w2_weight_scale.  Swizzled,
 * the layouts are new tensors that pad (triton_kernels tensor_details/layout_details:
 * HopperMXValueLayout, mma_version 3, rows to 16 and bytes of a row to 32; HopperMXScaleLayout
 * with vLLM's 8 warps, rows to 2 x 8 x 2 x 8 = 256 and scales of a row to 2), so the
 * checkpoint's scales stay allocated beside their padded copies; strided (StridedLayout, whose
 * swizzle_data returns its input), values and scales stay the loaded tensors.  Per expert and
 * MoE layer, with s the share and i its rounded width: values 2i x h/2 + h x i/2, scales
 * 2i x h/32 + h x i/32 (and, swizzled, their padded copies), biases (2i + h) x 4 in place of
 * the checkpoint's (2s + h) x 2 and 3 s h x 17/32. */
static uint64_t triton_per_expert(uint64_t share, uint64_t h, bool swizzled)
{
    uint64_t in = est_div_up(share, 64) * 64, hs = est_div_up(h, 32), vals, kept, swz, after;
    uint64_t before = share * h * 3 * 17 / 32 + (2 * share + h) * 2;
    if (swizzled)
        vals = est_div_up(2 * in, 16) * 16 * (est_div_up(est_div_up(h, 2), 32) * 32) +
               est_div_up(h, 16) * 16 * (est_div_up(in / 2, 32) * 32);
    else
        vals = 2 * in * (h / 2) + h * (in / 2);
    kept = 2 * in * hs + h * (in / 32);
    swz = swizzled ? est_div_up(2 * in, 256) * 256 * (est_div_up(hs, 2) * 2) +
                         est_div_up(h, 256) * 256 * (est_div_up(in / 32, 2) * 2)
                   : 0;
    after = vals + kept + swz + (2 * in + h) * 4;
    return after > before ? after - before : 0;
}

/* The bytes 'backend's layout of MXFP4 MoE experts adds to one GPU's share (checkpoint / tp)
 * of gpt-oss-style weights; 0 for other checkpoints and with expert parallelism (vLLM lays
 * experts out with other warps there: not modelled). */
uint64_t est_vllm_mxfp4_bytes(const struct gm_model *m, enum est_mxfp4_backend backend, uint64_t tp,
                              uint64_t ep)
{
    uint64_t share, moe_layers, per;
    if (m->quant.method != GM_QUANT_MXFP4 || !m->n_experts || ep > 1 || !tp)
        return 0;
    share = (m->moe_intermediate ? m->moe_intermediate : m->intermediate) / tp;
    moe_layers = m->n_layers > m->n_dense_layers ? m->n_layers - m->n_dense_layers : 0;
    switch (backend) {
    case EST_MXFP4_MARLIN:
        per = marlin_per_expert(share, m->hidden);
        break;
    case EST_MXFP4_TRITON:
    case EST_MXFP4_TRITON_STRIDED:
        per = triton_per_expert(share, m->hidden, backend == EST_MXFP4_TRITON);
        break;
    default:
        return 0;
    }
    return gm_mul_sat(gm_mul_sat(m->n_experts, moe_layers), per);
}

/* The weights component: one GPU's share 'w' over tp (and a pipeline stage's layers). */
static void engine_weights(struct est_ctx *cx, uint64_t w, uint64_t t, bool stage)
{
    for (size_t i = 0; i < cx->e->n_components; i++) {
        struct gm_est_component *c = &cx->e->components[i];
        if (c->kind != GM_KIND_WEIGHTS)
            continue;
        c->bytes = w;
        snprintf(c->note, sizeof c->note, "%llu parameters%s, divided over tp = %llu%s",
                 (unsigned long long)cx->n,
                 cx->weights_from_files ? " as stored in the model files" : "",
                 (unsigned long long)t, stage ? " and the pipeline stage's layers" : "");
    }
}

/* vLLM V1's profile run of a multimodal model (v1/worker/gpu_model_runner.py profile_run):
 * the encoder runs on as many dummy images of the largest size as the encoder budget
 * (max(max_num_batched_tokens, one image's tokens)) holds, and its outputs stay in
 * encoder_cache["tmp"] through the language model's dummy run: those tokens x hidden x 2
 * bytes join the profile peak.  The dummy image is the processor's largest (CLIP: its
 * fixed size; Qwen-VL: max_pixels 12845056, 16384 tokens). */
static uint64_t vllm_encoder_cache(struct est_ctx *cx, uint64_t batched)
{
    const struct gm_model *m = cx->m;
    uint64_t per_item = gm_model_image_tokens(m, 3584, 3584, NULL), budget, items;
    if (!per_item)
        return 0;
    budget = batched > per_item ? batched : per_item;
    items = budget / per_item;
    est_assume(cx->e,
               "vLLM multimodal profile: %llu dummy image(s) of %llu tokens encoded and held "
               "(encoder_cache) through the profile run, %llu B",
               (unsigned long long)items, (unsigned long long)per_item,
               (unsigned long long)(items * per_item * m->hidden * 2));
    return gm_mul_sat(gm_mul_sat(items, per_item), gm_mul_sat(m->hidden, 2));
}

/* vLLM's non-torch memory apart from the CUDA context and NCCL: the kernel modules and library
 * handles that loading and the profile run bring onto the device, 94 MiB before 0.9.2, measured
 * from one log, not read in code: row v008 of tests/data/validation/vllm_startup_logs.csv
 * (0.6.4, Llama-3.1-8B on an RTX 3090: 0.35 GiB printed for everything beside PyTorch's
 * allocated bytes, less the 247 MiB context est_cuda_context gives that GPU and the 17.5 MiB
 * the load leaves cached, est_vllm_load_cache_gap), the fit row the validation names; v011
 * (0.6.5, Phi-4 GPTQ through Marlin on an 80 GB A100, whose load replay matches its printed
 * weights to 0.7 MiB) judges it.  PR #12126's 0.16 GiB (0.7.0 on an H100, a
 * Llama-3.2-11B-Vision with dummy weights: a vision tower and its kernels) is no table row;
 * which kernels a start loads (model, quantisation, GPU) moves the figure and is not modelled.
 * At tp 2, 4, 6 or 8 the custom all-reduce's two IPC
 * buffers, cudaMalloc'd outside PyTorch: the metadata (ops.meta_size() + max_size) and the
 * input buffer (max_size), max_size 8 MiB, each rounded up to the 2 MiB allocation granule
 * (vllm/distributed/device_communicators/custom_all_reduce.py; its 8 MiB rank_data is a torch
 * tensor, and the peers' buffers are mapped, not allocated). */
#define VLLM_KERNEL_BYTES (94 * GM_MIB)
/* The row it is read from, named by the assumption line. */
#define VLLM_V0_KERNEL_FIT_ON "v008 of vllm_startup_logs.csv"

/* 0.9.2 to 0.10 (the V1 engine's growth since a snapshot taken before the communicators, PR
 * #19312): the single-GPU growth those versions print is a fifth of the 94 MiB above, 0.02
 * GiB (row v039 of tests/data/validation/vllm_startup_logs.csv, vLLM 0.10.2: "0.02 GiB for
 * non-torch memory", declared there as the fit row this is read from).  The other single-GPU
 * starts of those versions in the table print their KV memory only; the non-torch figure it
 * implies beside gpumem's weights and profile peak (validate.py --implied-non-torch) is 25 and
 * 17 MiB for Qwen2.5-7B on an A100 (v023, v024, 0.10.1), and they judge it.  Which modules
 * V0 and 0.11 count that these versions do not is not established here: the snapshot is read
 * at the same point of init_device (vllm/v1/worker/gpu_worker.py, before
 * init_worker_distributed_environment, as the 0.11 table of docs/estimate.md gives it). */
#define VLLM_V1_0_10_KERNEL_BYTES (20 * GM_MIB)
/* The row it is read from, named by the assumption line. */
#define VLLM_V1_0_10_KERNEL_FIT_ON "v039 of vllm_startup_logs.csv"

/* From 0.11 (the snapshot follows init_worker_distributed_environment, PR #25359): the
 * single-GPU growth 0.11.0 prints on an H100 is 0.14 GiB for Llama-3.3-70B FP8 (row v016 of
 * tests/data/validation/vllm_startup_logs.csv, read as 143 MiB), the row whose figure the
 * profile run's 420 MiB of NCCL is already taken against (v015 less v016, both at 0.11.0 on
 * H100s, so the pair's split stays the same).  The other 0.11.0 single-GPU starts judge it:
 * Qwen3-32B 0.14 GiB (v020), gpt-oss-20b/120b, Llama-3.1-8B and Qwen3-0.6B 0.13 GiB (v013,
 * v014, v017 to v019), and the later versions' KV memory where their logs print no non-torch
 * line.  Which kernels the figure holds (model, quantisation and PyTorch version move it by
 * some MiB: 133 against 143 on the same H100 and version) is not read in code. */
#define VLLM_V1_0_11_KERNEL_BYTES  (143 * GM_MIB)
#define VLLM_V1_0_11_KERNEL_FIT_ON "v016 of vllm_startup_logs.csv"

uint64_t est_vllm_kernel_bytes(uint32_t version)
{
    switch (vllm_era(version)) {
    case VLLM_V1_BEFORE_NCCL:
        return VLLM_V1_0_10_KERNEL_BYTES;
    case VLLM_V1_AFTER_NCCL:
    case VLLM_V1_GRAPHS:
        return VLLM_V1_0_11_KERNEL_BYTES;
    default:
        return VLLM_KERNEL_BYTES;
    }
}

uint64_t est_vllm_custom_allreduce_bytes(uint64_t tp, bool p2p, enum gm_gpu_link link)
{
    if (!p2p) /* CustomAllreduce.finalize_p2p: disabled without peer access */
        return 0;
    if (tp != 2 && tp != 4 && tp != 6 && tp != 8) /* CustomAllreduce._SUPPORTED_WORLD_SIZES */
        return 0;
    /* CustomAllreduce.__init__: "if world_size > 2 and not fully_connected", "not supported on
     * more than two PCIe-only GPUs", before its buffers are allocated; should_custom_ar says
     * the same ("world_size == 2 or self.fully_connected"; custom_all_reduce.py @ vllm-project/
     * vllm 00d618a).  fully_connected is NVLink between every pair (is_fully_connected), which
     * is GM_GPU_LINK_NVLINK; PCIe boards are not */
    if (tp > 2 && link != GM_GPU_LINK_NVLINK)
        return 0;
    return est_div_up(VLLM_CUSTOM_AR_MAX_SIZE + 1, 2 * GM_MIB) * 2 * GM_MIB +
           VLLM_CUSTOM_AR_MAX_SIZE;
}

/* From 0.11 the baseline follows init_worker_distributed_environment, which creates the pynccl
 * communicator (warmed up with an all-reduce) and the custom all-reduce, but not the NCCL
 * communicator of PyTorch's own tensor-parallel device group (new_group with no device bound,
 * vllm/distributed/parallel_state.py @ 0c175ae): PyTorch creates that, we assume, at the
 * group's first collective, which is the profile run's all-gather of the logits
 * (GroupCoordinator.all_gather -> DeviceCommunicatorBase.all_gather, all_gather_into_tensor on
 * device_group, vllm/distributed/device_communicators/base_device_communicator.py @ a12c734;
 * CudaCommunicator has no all-gather of its own, cuda_communicator.py @ 00b5a01).  What NCCL
 * connects for it then is non-torch growth.  Its size is not a vLLM setting: 420 MiB is read
 * from one pair of logs of the validation rows, v015 at tp 2 (563.2 MiB printed) less v016 at
 * tp 1 (143.4 MiB; the same model, version and H100), and judged on the other tp 2 row of
 * that version (v021).  None without peer access within the node (no peer access, or one GPU
 * per node), where NCCL's buffers are host memory. */
#define VLLM_PROFILE_NCCL_BYTES (420 * GM_MIB)

uint64_t est_vllm_profile_nccl_bytes(uint32_t version, uint64_t tp, bool p2p)
{
    if (tp < 2 || !p2p || (version && version < GM_VERSION(0, 11, 0)))
        return 0;
    return VLLM_PROFILE_NCCL_BYTES;
}

/* What vLLM's log prints as non-torch memory, by where the version takes its baseline: before
 * 0.2.5 nothing (profile_num_available_blocks charged torch.cuda.max_memory_allocated() alone,
 * until PR #2031 "Fix peak memory profiling" took total - free: "some memory (probably related
 * to NCCL?) is allocated/freed not through the PyTorch memory allocator"); 0.3.2 to 0.6.3
 * the growth since init_device's free memory (PR #2863: init_gpu_memory is read after
 * set_device, so after the context, and before init_worker_distributed_environment, so NCCL
 * is growth; vllm/worker/worker.py as vLLM 0.6.1 has it, AmberLJC/vllm-0.6.1 @ 5597260); the
 * global versions (0.2.5 to 0.3.1; 0.6.4, PR #9352; 0.8 to 0.9.1) take everything on the device
 * that PyTorch did not allocate (total - free - allocated after the profile run: the context and
 * NCCL included); 0.6.5 to 0.7 (V0's memory_profiling) and 0.9.2 to 0.10 (PR #19312) the growth
 * since a snapshot taken before the communicators (NCCL and the custom all-reduce buffers
 * included, the context not); from 0.11 (PR #25359) the snapshot follows
 * init_worker_distributed_environment, so the kernels remain, and at tp >= 2 the communicator
 * the profile run creates (est_vllm_profile_nccl_bytes). 'own' is the non-torch memory beside
 * the context and NCCL (est_vllm_kernel_bytes + the custom all-reduce, or --non-torch); the result
 * is also what the version charges to its budget for it.  '*rank0' is the part of it rank 0
 * alone holds, the logits' gather connections NCCL's figure carries (est_nccl_gather_bytes):
 * the other ranks print the result less it. */
static uint64_t vllm_non_torch_logged(struct est_ctx *cx, enum vllm_era era, uint64_t own,
                                      uint64_t ca, uint64_t *rank0)
{
    const struct gm_job *j = cx->job;
    *rank0 = 0;
    switch (era) {
    case VLLM_V0_TORCH_PEAK:
        return 0;
    case VLLM_V0_GLOBAL:
    case VLLM_V1_GLOBAL:
        *rank0 = est_nccl_gather_bytes(cx);
        return gm_add_sat(own, gm_add_sat(est_cuda_context_bytes(cx), est_nccl_bytes(cx)));
    case VLLM_V0_INIT_BASELINE:
    case VLLM_V0_PROFILED:
    case VLLM_V1_BEFORE_NCCL:
        *rank0 = est_nccl_gather_bytes(cx);
        return gm_add_sat(own, est_nccl_bytes(cx));
    case VLLM_V1_AFTER_NCCL:
    case VLLM_V1_GRAPHS:
        break;
    }
    return gm_add_sat(
        own > ca ? own - ca : 0,
        est_vllm_profile_nccl_bytes(j->stack.vllm, j->parallel.tp, est_node_peers(cx)));
}

/* ---- the load's cache left in PyTorch's allocator (0.6.4 to 0.6.6) -------------------------
 *
 * 0.6.4's determine_num_available_blocks (PR #9352) calls torch.cuda.empty_cache() after the
 * profile run and adds "non_torch_allocations = total_allocated_bytes - torch_allocated_bytes",
 * the device's used memory less torch.cuda.memory_stats()["allocated_bytes.all.current"], to the
 * peak (vllm/worker/worker.py @ 6ae5229): cached bytes PyTorch has not allocated count as
 * non-torch there too, beside the context and the kernels.
 * From PR #10511 (0.6.5) until PR #11809 (0.7.0) V0's memory_profiling took non-torch memory
 * as the device's used memory less the baseline, the weights and the change in
 * torch.cuda.memory_stats()["allocated_bytes.all.current"], measured after gc.collect() and
 * torch.cuda.empty_cache() (V0's vllm/utils.py memory_profiling; its docstring, "subtract the
 * baseline memory, the memory used by the model weights, and diff of
 * torch.cuda.memory_stats()["allocated_bytes.all.current"]", read as mindspore-ai/vllm-mindspore
 * keeps it, vllm_mindspore/utils.py @ 0024d6b).  The weights are the allocated bytes
 * the load added (DeviceMemoryProfiler), so what the allocator still reserves but has not
 * allocated, the free blocks of segments that also hold a live tensor and that empty_cache()
 * cannot release, counts as non-torch.  PR #11809 replaced the allocated figure with
 * torch.cuda.memory_reserved() because "allocated_bytes.all.current does not include the memory
 * allocated from cudaMalloc but cannot be released (partially used)".  VLLM_KERNEL_BYTES comes
 * from a log of the reserved-based formula (PR #12126), so it holds none of this.
 *
 * The load is replayed through gpumem's allocator model (src/alloc, PyTorch's caching
 * allocator with its default settings), for a dense decoder built as vLLM builds it under
 * `with target_device:` (DefaultModelLoader.load_model: _initialize_model, load_weights, then
 * each module's quant_method.process_weights_after_loading):
 * - the parameters in construction order: the embedding, then per layer qkv_proj, o_proj,
 *   the rotary cos/sin cache once (get_rope caches one RotaryEmbedding: inv_freq, t, freqs,
 *   cos, sin and their fp32 cat, kept as a 16-bit copy), gate_up_proj, down_proj and the two
 *   norms; the final norm and the lm_head (none when tied).  A 16-bit linear is one weight
 *   (+ bias); a GPTQ linear's create_weights makes qweight, g_idx, qzeros and scales in that
 *   order (GPTQMarlinLinearMethod.create_weights, vllm/model_executor/layers/quantization/
 *   gptq_marlin.py, read at 00161ce, a later commit; the plain GPTQ kernel's the same four);
 * - load_weights: a GPTQ linear fused of column shards (qkv_proj, gate_up_proj) copies each
 *   shard through a GPU temporary (ls_load_shards);
 * - Marlin's process_weights_after_loading, per linear in module order (MarlinLinearKernel,
 *   vllm/model_executor/layers/quantization/kernels/mixed_precision/marlin.py, order read at
 *   04aa528, a later commit than 0.6.5): the int32 workspace (0.6.5's per-linear
 *   marlin_make_workspace, out / 64 x 16; later commits share one per device, which moves the
 *   replay of Phi-4 by 2 MiB), g_idx and qzeros replaced by empty tensors (no act-order,
 *   symmetric), qweight replaced by gptq_marlin_repack's output (same bytes), scales by
 *   marlin_permute_scales' copy.
 * Then empty_cache(); the result is reserved - allocated.  Not replayed: what the profile run
 * does to it, either way (its lasting blocks, e.g. cuBLAS's workspace, add to it in segments
 * they leave partly used and take from it where they fill the load's holes: allocated bytes
 * that raise no used memory); the rotary cache is taken max_position_embeddings long, which vLLM's
 * scaled rope classes may size otherwise.  Safetensors reads on the CPU: only the copies into
 * slices take GPU temporaries.  Dense text decoders only (no experts, linear attention, MLA or
 * vision tower), 16-bit or GPTQ weights; 0 otherwise. */
struct load_sim {
    struct gm_alloc *a;
    struct gm_error *err;
    enum gm_status st;
};

static uint64_t ls_new(struct load_sim *s, uint64_t bytes)
{
    uint64_t p = 0;
    if (s->st == GM_OK && bytes)
        s->st = gm_alloc_malloc(s->a, bytes, 0, &p, s->err);
    return p;
}

static void ls_free(struct load_sim *s, uint64_t p)
{
    if (s->st == GM_OK && p)
        s->st = gm_alloc_dealloc(s->a, p, s->err);
}

struct ls_linear {
    uint64_t in, out;     /* this GPU's shard */
    uint64_t w, g, z, sc; /* addresses: weight / qweight, g_idx, qzeros, scales */
};

static void ls_create(struct load_sim *s, struct ls_linear *l, const struct gm_quant *q, bool bias)
{
    if (!q) {
        l->w = ls_new(s, l->in * l->out * 2);
        if (bias)
            ls_new(s, l->out * 2);
        return;
    }
    uint64_t gs = q->group_size ? q->group_size : l->in, groups = est_div_up(l->in, gs),
             pack = 32 / q->bits;
    l->w = ls_new(s, l->in / pack * l->out * 4);
    l->g = ls_new(s, l->in * 4);
    l->z = ls_new(s, groups * (l->out / pack) * 4);
    l->sc = ls_new(s, groups * l->out * 2);
    if (bias)
        ls_new(s, l->out * 2);
}

/* load_weights into a GPTQ linear fused of 'n' column shards (q, k, v or gate, up) of 'outs'
 * columns each: every shard's qweight, qzeros and scales are narrowed on the output dim (dim 1
 * of [in / pack, out]), so the destination is not contiguous and PyTorch's CPU-to-GPU copy_
 * goes through a contiguous temporary on the GPU (copy_kernel_cuda: "dst_contig =
 * dst.is_contiguous() ? dst : at::empty_like(dst)", aten/src/ATen/native/cuda/Copy.cu), freed
 * after it.  A 16-bit weight [out, in] is narrowed on dim 0: contiguous, no temporary. */
static void ls_load_shards(struct load_sim *s, const struct ls_linear *l, const struct gm_quant *q,
                           const uint64_t *outs, size_t n)
{
    uint64_t gs = q->group_size ? q->group_size : l->in, groups = est_div_up(l->in, gs),
             pack = 32 / q->bits;
    for (size_t i = 0; i < n; i++) {
        ls_free(s, ls_new(s, l->in / pack * outs[i] * 4));
        ls_free(s, ls_new(s, groups * (outs[i] / pack) * 4));
        ls_free(s, ls_new(s, groups * outs[i] * 2));
    }
}

static void ls_marlin(struct load_sim *s, struct ls_linear *l, const struct gm_quant *q)
{
    uint64_t gs = q->group_size ? q->group_size : l->in, groups = est_div_up(l->in, gs), n;
    ls_new(s, l->out / 64 * 16 * 4); /* the workspace, kept */
    ls_free(s, l->g);
    ls_free(s, l->z);
    n = ls_new(s, l->in / (32 / q->bits) * l->out * 4);
    ls_free(s, l->w);
    l->w = n;
    n = ls_new(s, groups * l->out * 2);
    ls_free(s, l->sc);
    l->sc = n;
}

/* Why the load is not replayed: NULL where it is.  The replay builds one dense text decoder
 * on one GPU of one stage; anything else would need its own construction order. */
static const char *ls_unreplayed(const struct gm_model *m, const struct gm_quant *q, bool marlin,
                                 uint64_t t, uint64_t pp)
{
    if (!m || !t || !m->n_heads || !m->hidden || !m->intermediate || !m->n_layers)
        return "a model without its shape";
    if (m->n_experts)
        return "mixture-of-experts models";
    if (m->n_linear_layers)
        return "linear-attention layers";
    if (m->kv_lora_rank)
        return "MLA attention";
    if (m->vision.kind != GM_VISION_NONE)
        return "vision towers";
    if (!m->gated_mlp)
        return "an MLP without a gate";
    if (m->n_layers > 1024) /* more layers than any released model has */
        return "more than 1024 layers";
    if (m->n_heads % t)
        return "heads that tp does not divide";
    if (pp > 1)
        return "pipeline stages (pp > 1)";
    if (q && q->method != GM_QUANT_GPTQ)
        return "quantised weights other than GPTQ";
    if (q && (!q->bits || 32 % q->bits))
        return "GPTQ of 3, 5, 6 or 7 bits"; /* not packed whole into int32 */
    if (q && marlin && q->desc_act)
        return "act-order Marlin"; /* its layers keep a sorted g_idx and its permutation */
    return NULL;
}

/* ls_shape's flags */
enum ls_flag {
    LS_QKV_BIAS = 1 << 0,
    LS_TIED_EMBEDDINGS = 1 << 1,
    LS_MARLIN = 1 << 2,      /* GPTQ repacked by gptq_marlin */
    LS_TEMPORARIES = 1 << 3, /* the copies of fused GPTQ shards through GPU temporaries */
};

/* The inputs of one replay of the load: ls_run() reads nothing else, so equal shapes give
 * equal replays, and a shape is the key an estimate remembers a replay by (est_load_memo).
 * Compared as bytes (load_memo_find): every member is a uint64_t, the flags one of them, so
 * the struct has no padding whose bytes could differ (the assertion below keeps it so). */
struct ls_shape {
    uint64_t hidden;        /* elements */
    uint64_t n_heads;       /* query heads of the model */
    uint64_t n_kv_heads;    /* KV heads of the model */
    uint64_t head_dim;      /* elements (the config's, or hidden / heads) */
    uint64_t intermediate;  /* the model's MLP width */
    uint64_t n_layers;      /* decoder layers */
    uint64_t vocab;         /* the model's vocabulary */
    uint64_t max_positions; /* the rotary cache's rows, 0 = none */
    uint64_t t;             /* tensor-parallel GPUs */
    uint64_t bits;          /* GPTQ bits per weight, 0 = 16-bit weights */
    uint64_t group_size;    /* GPTQ input features per scale, 0 = whole column */
    uint64_t flags;         /* enum ls_flag */
};
_Static_assert(sizeof(struct ls_shape) == 12 * sizeof(uint64_t) &&
                   offsetof(struct ls_shape, flags) == 11 * sizeof(uint64_t),
               "struct ls_shape: twelve uint64_t members, the flags last, no padding (compared "
               "with memcmp)");

static void ls_shape_of(const struct gm_model *m, const struct gm_quant *q, bool marlin,
                        bool temporaries, uint64_t t, struct ls_shape *sh)
{
    memset(sh, 0, sizeof *sh);
    sh->hidden = m->hidden;
    sh->n_heads = m->n_heads;
    sh->n_kv_heads = m->n_kv_heads;
    sh->head_dim = m->head_dim ? m->head_dim : m->hidden / m->n_heads;
    sh->intermediate = m->intermediate;
    sh->n_layers = m->n_layers;
    sh->vocab = m->vocab;
    sh->max_positions = m->max_positions;
    sh->t = t;
    sh->bits = q ? q->bits : 0;
    sh->group_size = q ? q->group_size : 0;
    sh->flags = (m->qkv_bias ? LS_QKV_BIAS : 0u) | (m->tied_embeddings ? LS_TIED_EMBEDDINGS : 0u) |
                (q && marlin ? LS_MARLIN : 0u) | (q && temporaries ? LS_TEMPORARIES : 0u);
}

/* The replay of a load of shape 'sh': the allocated bytes after empty_cache() and the cache
 * gap beside them (reserved - allocated). */
static enum gm_status ls_run(const struct ls_shape *sh, uint64_t *gap, uint64_t *allocated,
                             struct gm_error *err)
{
    struct gm_alloc_conf conf;
    struct gm_alloc_fakedev fake;
    struct gm_alloc_device dev = {&gm_alloc_fakedev_ops, &fake, EST_MAX_BYTES};
    struct gm_alloc_stats stats;
    struct load_sim s = {NULL, err, GM_OK};
    struct ls_linear lin[4];
    struct gm_quant gq = {
        .method = GM_QUANT_GPTQ, .bits = (unsigned)sh->bits, .group_size = sh->group_size};
    const struct gm_quant *q = sh->bits ? &gq : NULL;
    uint64_t t = sh->t, hd = sh->head_dim, vocab, rot;
    uint64_t kv_heads = sh->n_kv_heads >= t ? sh->n_kv_heads / t : 1;
    gm_alloc_conf_init(&conf);
    gm_alloc_fakedev_init(&fake, 0);
    if ((s.st = gm_alloc_new(&conf, &dev, &s.a, err)) != GM_OK)
        return s.st;
    vocab = est_div_up(est_div_up(sh->vocab, 64) * 64, t);
    rot = hd; /* the cos/sin cache: max_positions x rotary dim */
    lin[0] = (struct ls_linear){sh->hidden, (sh->n_heads / t + kv_heads * 2) * hd, 0, 0, 0, 0};
    lin[1] = (struct ls_linear){sh->n_heads / t * hd, sh->hidden, 0, 0, 0, 0};
    lin[2] = (struct ls_linear){sh->hidden, 2 * sh->intermediate / t, 0, 0, 0, 0};
    lin[3] = (struct ls_linear){sh->intermediate / t, sh->hidden, 0, 0, 0, 0};
    {
        struct ls_linear *all = gm_calloc(sh->n_layers * 4, sizeof *all);
        if (!all) {
            gm_alloc_free(s.a);
            return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "vLLM load replay: out of memory");
        }
        ls_new(&s, vocab * sh->hidden * 2); /* VocabParallelEmbedding */
        for (uint64_t i = 0; i < sh->n_layers && s.st == GM_OK; i++) {
            struct ls_linear *l = all + 4 * i;
            memcpy(l, lin, sizeof lin);
            ls_create(&s, &l[0], q, sh->flags & LS_QKV_BIAS);
            ls_create(&s, &l[1], q, false);
            if (i == 0 && sh->max_positions) {
                uint64_t pos = sh->max_positions, inv = ls_new(&s, rot / 2 * 4),
                         tt = ls_new(&s, pos * 4), fr = ls_new(&s, pos * rot / 2 * 4),
                         co = ls_new(&s, pos * rot / 2 * 4), si = ls_new(&s, pos * rot / 2 * 4),
                         cat = ls_new(&s, pos * rot * 4);
                ls_free(&s, inv); /* _compute_cos_sin_cache returns: its locals go */
                ls_free(&s, tt);
                ls_free(&s, fr);
                ls_free(&s, co);
                ls_free(&s, si);
                ls_new(&s, pos * rot * 2); /* cache.to(dtype), the buffer kept */
                ls_free(&s, cat);
            }
            ls_create(&s, &l[2], q, false);
            ls_create(&s, &l[3], q, false);
            ls_new(&s, sh->hidden * 2); /* input_layernorm */
            ls_new(&s, sh->hidden * 2); /* post_attention_layernorm */
        }
        ls_new(&s, sh->hidden * 2);
        if (!(sh->flags & LS_TIED_EMBEDDINGS))
            ls_new(&s, vocab * sh->hidden * 2);
        /* load_weights in the checkpoint's name order within a layer, mlp before self_attn:
         * safetensors' safe_open.keys() sorts the names ("keys.sort()", huggingface/safetensors
         * bindings/python/src/lib.rs) and vLLM's safetensors_weights_iterator walks them.  The
         * result depends on it: qkv_proj before gate_up_proj gives Phi-4 190 MiB, not 176 (the
         * layer order and each tensor's shards loaded together change nothing) */
        if (sh->flags & LS_TEMPORARIES) {
            uint64_t kv = kv_heads * hd, qkv[3] = {sh->n_heads / t * hd, kv, kv},
                     gu[2] = {sh->intermediate / t, sh->intermediate / t};
            for (uint64_t i = 0; i < sh->n_layers && s.st == GM_OK; i++) {
                ls_load_shards(&s, &all[4 * i + 2], q, gu, 2);
                ls_load_shards(&s, &all[4 * i], q, qkv, 3);
            }
        }
        if (sh->flags & LS_MARLIN)
            for (uint64_t i = 0; i < sh->n_layers * 4 && s.st == GM_OK; i++)
                ls_marlin(&s, &all[i], q);
        gm_free(all);
    }
    if (s.st == GM_OK) {
        gm_alloc_empty_cache(s.a);
        gm_alloc_get_stats(s.a, &stats);
        *gap = stats.reserved_bytes[GM_ALLOC_STAT_ALL].current -
               stats.allocated_bytes[GM_ALLOC_STAT_ALL].current;
        *allocated = stats.allocated_bytes[GM_ALLOC_STAT_ALL].current;
    }
    gm_alloc_free(s.a);
    return s.st;
}

/* ---- the loads an estimate has replayed, by shape ----
 *
 * An estimate runs its job three times (the point and the two ends of the range) and a
 * search runs many jobs into one estimate; the load's shape changes with none of what the
 * bounds or a batch size change, and a replay walks every tensor of the model through the
 * allocator model.  So the estimate keeps each shape's replay (as step_alloc.c keeps the step
 * replays): a few, the oldest replaced first; a search over tp asks for one shape a tp. */
#define LOAD_MEMO_MAX 8

struct est_load_memo {
    size_t n;      /* entries used */
    size_t next;   /* the entry a new shape replaces once all are used */
    uint64_t runs; /* loads replayed into it (est_vllm_load_runs) */
    struct {
        struct ls_shape shape;
        uint64_t allocated; /* bytes */
        uint64_t gap;       /* bytes */
    } ent[LOAD_MEMO_MAX];
};

void est_load_memo_free(struct est_load_memo *m)
{
    gm_free(m);
}

uint64_t est_vllm_load_runs(const struct gm_estimate *e)
{
    return e->store->loads ? e->store->loads->runs : 0;
}

/* The entry of 'sh' in 'm' (may be NULL), or -1 */
static ptrdiff_t load_memo_find(const struct est_load_memo *m, const struct ls_shape *sh)
{
    for (size_t i = 0; m && i < m->n; i++)
        if (memcmp(&m->ent[i].shape, sh, sizeof *sh) == 0)
            return (ptrdiff_t)i;
    return -1;
}

/* Keep the replay of 'sh' in *mp; nothing when out of memory (only a later run repeats it). */
static void load_memo_put(struct est_load_memo **mp, const struct ls_shape *sh, uint64_t gap,
                          uint64_t allocated)
{
    struct est_load_memo *m = *mp;
    size_t i;
    if (!m && !(m = *mp = gm_calloc(1, sizeof *m)))
        return;
    if (m->n < LOAD_MEMO_MAX) {
        i = m->n++;
    } else {
        i = m->next;
        m->next = (m->next + 1) % LOAD_MEMO_MAX;
    }
    m->ent[i].shape = *sh;
    m->ent[i].gap = gap;
    m->ent[i].allocated = allocated;
}

void est_load_memo_copy(struct est_load_memo **to, const struct est_load_memo *from)
{
    for (size_t i = 0; from && i < from->n; i++)
        if (load_memo_find(*to, &from->ent[i].shape) < 0)
            load_memo_put(to, &from->ent[i].shape, from->ent[i].gap, from->ent[i].allocated);
}

/* ls_run() of 'sh', answered from and kept in *mp where 'mp' is not NULL. */
static enum gm_status ls_run_memo(struct est_load_memo **mp, const struct ls_shape *sh,
                                  uint64_t *gap, uint64_t *allocated, struct gm_error *err)
{
    ptrdiff_t i = mp ? load_memo_find(*mp, sh) : -1;
    enum gm_status st;
    if (i >= 0) {
        *gap = (*mp)->ent[i].gap;
        *allocated = (*mp)->ent[i].allocated;
        return GM_OK;
    }
    if ((st = ls_run(sh, gap, allocated, err)) != GM_OK || !mp)
        return st;
    load_memo_put(mp, sh, *gap, *allocated);
    if (*mp)
        (*mp)->runs++;
    return GM_OK;
}

static enum gm_status load_replay(const struct gm_model *m, const struct gm_quant *q, bool marlin,
                                  bool temporaries, uint64_t t, uint64_t pp,
                                  struct est_load_memo **memo, uint64_t *gap, uint64_t *allocated,
                                  const char **why, struct gm_error *err)
{
    struct ls_shape sh;
    const char *skip = ls_unreplayed(m, q, marlin, t, pp);
    *gap = 0;
    *allocated = 0;
    if (why)
        *why = skip;
    if (skip)
        return GM_OK;
    ls_shape_of(m, q, marlin, temporaries, t, &sh);
    return ls_run_memo(memo, &sh, gap, allocated, err);
}

enum gm_status est_vllm_load_cache_replay(const struct gm_model *m, const struct gm_quant *q,
                                          bool marlin, bool temporaries, uint64_t t, uint64_t pp,
                                          uint64_t *gap, const char **why, struct gm_error *err)
{
    uint64_t allocated;
    return load_replay(m, q, marlin, temporaries, t, pp, NULL, gap, &allocated, why, err);
}

enum gm_status est_vllm_load(const struct gm_model *m, const struct gm_quant *q, bool marlin,
                             uint64_t t, uint64_t pp, struct est_load_memo **memo,
                             uint64_t *allocated, uint64_t *gap, const char **why,
                             struct gm_error *err)
{
    return load_replay(m, q, marlin, true, t, pp, memo, gap, allocated, why, err);
}

enum gm_status est_vllm_load_allocated(const struct gm_model *m, const struct gm_quant *q,
                                       bool marlin, uint64_t t, uint64_t pp, uint64_t *allocated,
                                       const char **why, struct gm_error *err)
{
    uint64_t gap;
    return est_vllm_load(m, q, marlin, t, pp, NULL, allocated, &gap, why, err);
}

enum gm_status est_vllm_load_cache_gap(const struct gm_model *m, const struct gm_quant *q,
                                       bool marlin, uint64_t t, uint64_t pp, uint64_t *gap,
                                       const char **why, struct gm_error *err)
{
    return est_vllm_load_cache_replay(m, q, marlin, true, t, pp, gap, why, err);
}

/* ---- what 0.3.2 to 0.6.3 charge for the profile run: PyTorch's reserved bytes ----------------
 *
 * From PR #2863 (0.3.2) to PR #9352 (0.6.4) the worker charges init_device's free memory less
 * the free memory right after the profile run: determine_num_available_blocks (earlier
 * profile_num_available_blocks) calls torch.cuda.empty_cache() before profile_run() and then
 * only torch.cuda.synchronize() and torch.cuda.mem_get_info() before "peak_memory =
 * self.init_gpu_memory - free_gpu_memory" (vllm/worker/worker.py: the stored 0.6-era copy in
 * vllm-project/vllm @ 002a0ba, and AmberLJC/vllm-0.6.1 @ 5597260).  So the run is charged with
 * every segment PyTorch's caching allocator reserved for it and still caches, not the bytes it
 * allocated at its peak.  No collective delays a free: init_device sets
 * TORCH_NCCL_AVOID_RECORD_STREAMS=1 ("torch.distributed.all_reduce does not free the input
 * tensor until the synchronization point", vLLM issue #2150), so a tensor an all-reduce read
 * goes back to the pool when Python drops it.
 *
 * The replay walks the first two decoder layers of a dense model with a gated MLP as vLLM's
 * LlamaDecoderLayer and LlamaMLP run them (vllm/model_executor/models/llama.py @ 0035bdf), the
 * 16-bit tensors of 'tokens' tokens on one of 't' GPUs through gpumem's allocator model
 * (PyTorch's caching allocator, default settings, best fit): the embedding's output (the first
 * residual) and input_layernorm's output (a new tensor in the first layer only; later layers'
 * fused_add_rms_norm writes in place); qkv_proj's output; the attention's output buffer
 * (torch.empty_like(query)) and the backend's own result copied into it (xformers'
 * memory_efficient_attention_forward or flash_attn_varlen_func; freed); o_proj's output; then
 * qkv and the attention output freed, and the layer's input dropped; post_attention_layernorm in
 * place; gate_up_proj's output, SiLU-and-mul's, down_proj's, then gate_up and SiLU-and-mul
 * freed and o_proj's output dropped.  Its allocated peak is profile_activations()'s figure; what
 * it adds is the reserved peak above it, which the second layer already holds (every later
 * layer reuses the same cached blocks); the caller charges what that reserved peak is above the
 * peak it already pays (a sampler's phase above the forward reuses the cached segments).  Not
 * replayed: the cuBLAS workspace's segment (under 12 MiB beside its own bytes), the sampler's small
 * tensors and the other layer kinds (0 there). */
enum gm_status est_vllm_profile_reserve(const struct gm_model *m, uint64_t tokens, uint64_t t,
                                        uint64_t *extra, struct gm_error *err)
{
    struct gm_alloc_conf conf;
    struct gm_alloc_fakedev fake;
    struct gm_alloc_device dev = {&gm_alloc_fakedev_ops, &fake, EST_MAX_BYTES};
    struct gm_alloc_stats stats;
    struct load_sim s = {NULL, err, GM_OK};
    struct est_geom g;
    uint64_t h, qkv, att, gu, act, hn, res;
    *extra = 0;
    if (!m->gated_mlp || m->n_experts || m->n_linear_layers || !tokens || !t)
        return GM_OK;
    est_geom(m, &g);
    h = gm_mul_sat(tokens, m->hidden * 2);
    qkv = gm_mul_sat(tokens, (uint64_t)((g.q + g.k + g.v) / (double)t) * 2);
    att = gm_mul_sat(tokens, (uint64_t)(g.o_in / (double)t) * 2);
    act = gm_mul_sat(tokens, (uint64_t)(g.mlp_max / (double)t) * 2);
    gu = gm_mul_sat(act, 2);
    gm_alloc_conf_init(&conf);
    gm_alloc_fakedev_init(&fake, 0);
    if ((s.st = gm_alloc_new(&conf, &dev, &s.a, err)) != GM_OK)
        return s.st;
    res = ls_new(&s, h);
    hn = ls_new(&s, h);
    for (int layer = 0; layer < 2 && s.st == GM_OK; layer++) {
        uint64_t pq = ls_new(&s, qkv), po = ls_new(&s, att), pr = ls_new(&s, att), pa, pg, pd;
        ls_free(&s, pr);
        pa = ls_new(&s, h); /* o_proj */
        ls_free(&s, pq);
        ls_free(&s, po);
        ls_free(&s, hn);
        pg = ls_new(&s, gu);
        pd = ls_new(&s, act);
        hn = ls_new(&s, h); /* down_proj: the next layer's input */
        ls_free(&s, pg);
        ls_free(&s, pd);
        ls_free(&s, pa);
    }
    (void)res;
    if (s.st == GM_OK) {
        gm_alloc_get_stats(s.a, &stats);
        *extra = stats.reserved_bytes[GM_ALLOC_STAT_ALL].peak -
                 stats.allocated_bytes[GM_ALLOC_STAT_ALL].peak;
    }
    gm_alloc_free(s.a);
    return s.st;
}

/* The profile peak of a V0 worker that does not sample.  From 0.2.7 (PR #2221, which gave the
 * engine a driver worker and replaced the all-gather of the logits) to before 0.8, at tp > 1,
 * the logits are gathered to rank 0 only (LogitsProcessor._get_logits:
 * tensor_model_parallel_gather, "None may be returned for rank > 0";
 * vllm/model_executor/layers/logits_processor.py @ 307e086) and only the driver worker samples
 * (ModelRunner.execute_model: "Only perform sampling in the driver worker",
 * vllm/worker/model_runner.py @ 587909c), so every other rank's profile run peaks at its forward,
 * or at the hidden states beside its own shard of the 16-bit logits (max_num_seqs x the vocabulary
 * padded to 64, over tp).  The executor sizes the pool by the smallest count of blocks the workers
 * report (DistributedGPUExecutor.determine_num_available_blocks, "takes the min of the results",
 * vllm/executor/distributed_gpu_executor.py @ a4aeba1): the driver's, which the pool keeps;
 * the others print more KV memory available.  0 where every rank samples (V1, one GPU,
 * pipeline stages). */
bool est_vllm_rank0_gathers(const struct gm_job *j)
{
    uint32_t v = j->stack.vllm;
    return est_allocator(j) == EST_ALLOC_VLLM && vllm_era_v0(vllm_era(v)) &&
           !(v && v < GM_VERSION(0, 2, 7)) && j->parallel.tp >= 2 && j->parallel.pp <= 1;
}

static uint64_t vllm_worker_peak(const struct gm_job *j, const struct gm_model *m, uint64_t tokens,
                                 uint64_t seqs, uint64_t ws, bool blas)
{
    uint64_t t = j->parallel.tp, fwd, shard, head;
    if (!est_vllm_rank0_gathers(j))
        return 0;
    /* the worker's own cuBLAS workspace (est_torch_cublas_workspace_bytes): from its first
     * layer's GEMM, or from its lm_head shard's ('blas' as vllm_layers_blas) */
    fwd = gm_add_sat(profile_activations(m, tokens, t), blas ? ws : 0);
    shard = gm_mul_sat(gm_mul_sat(seqs, est_div_up(est_div_up(m->vocab, 64) * 64, t)), 2);
    head = gm_add_sat(gm_add_sat(gm_mul_sat(gm_mul_sat(tokens, m->hidden), 2), shard), ws);
    return fwd > head ? fwd : head;
}

/* vLLM's accounting: the weights on one GPU (the model stage's, divided by tp), the
 * profile run's activation peak, the sampler, non-torch memory, and the KV pool in
 * whatever the budget leaves. */
static enum gm_status engine_vllm(struct est_ctx *cx, struct gm_error *err)
{
    const struct gm_job *j = cx->job;
    const struct gm_job_vllm *v = &j->engine.vllm;
    const struct gm_model *m = cx->m;
    struct gm_estimate *e = cx->e;
    struct gm_est_serving *sv = &e->serving;
    enum vllm_era era = vllm_era(j->stack.vllm);
    uint64_t t = j->parallel.tp, pp = j->parallel.pp, n = cx->n, w, act, sampler, budget, non_torch,
             graphs, per_token, T, kv_heads, need, pool, layers, ca, logged,
             bs = v->block_size ? v->block_size : 16, seqs, hidden_bytes, graph_sizes = 0,
             graph_largest = 0, graph_full = 0, graph_ar[EST_VLLM_GRAPH_AR_PATHS] = {0}, ws,
             ws_peak, kernels;
    uint64_t graph_charged = 0;  /* what the budget pays for the graphs (vllm_graph_bytes) */
    uint64_t logged_rank0 = 0;   /* what of 'logged' rank 0 alone holds */
    uint64_t load_gap = 0;       /* the weights' load replayed once: the cache it leaves */
    const char *load_why = NULL; /* what the replay does not cover, or NULL */
    unsigned kvb100, per_logit;
    bool blas, ca_spans;
    enum vllm_sampler sampler_kind;
    enum gm_dtype kvt;
    char note[GM_EST_NOTE_MAX];
    enum gm_status st;

    if ((st = engine_tp_check(m, t, err)) != GM_OK ||
        (st = vllm_quant_kernel_check(cx, err)) != GM_OK)
        return st;
    if (pp > m->n_layers)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "--pp %llu exceeds the %llu decoder layers", (unsigned long long)pp,
                       (unsigned long long)m->n_layers);
    kvt = engine_kv_dtype(j, m);
    kvb100 = kv_elem_bytes_x100(kvt);
    /* vLLM replicates KV heads when tp exceeds them, and an MLA latent on every GPU; a
     * pipeline stage holds its layers */
    kv_heads = m->n_kv_heads >= t ? m->n_kv_heads / t : 1;
    layers = est_div_up(m->n_layers, pp);
    sv->max_model_len = engine_len(j, m, v->max_model_len, &sv->max_model_len_from);
    if (sv->max_model_len_from == GM_MAX_LEN_ROPE) {
        bool yarn_orig = m->rope_scaling == GM_ROPE_YARN && m->rope_original_positions;
        est_assume(e,
                   "vLLM: max_model_len %llu = %s %llu x rope_scaling factor %g (%s): vLLM's "
                   "own length when none is given",
                   (unsigned long long)sv->max_model_len,
                   yarn_orig ? "original_max_position_embeddings" : "max_position_embeddings",
                   (unsigned long long)(yarn_orig ? m->rope_original_positions : m->max_positions),
                   m->rope_factor, gm_rope_scaling_name(m->rope_scaling));
        if (m->rope_scaling == GM_ROPE_YARN && !yarn_orig)
            est_assume(e, "vLLM: yarn rope scaling without original_max_position_embeddings: "
                          "vLLM reads that key outright (_get_and_verify_max_len) and may refuse "
                          "the config; max_position_embeddings taken in its place");
    }
    est_vllm_batch(j, sv->max_model_len, &T, &seqs);
    sv->max_num_batched_tokens = T;
    sv->max_num_seqs = seqs;
    per_token = est_vllm_kv_per_token(m, t, pp, kvb100, sv->max_model_len, T, bs);
    w = est_div_up(cx->stored_weight_bytes, t);
    {
        enum est_mxfp4_backend b = est_vllm_mxfp4_backend(j->gpu.sm, j->stack.vllm, j->stack.torch);
        uint64_t added = est_vllm_mxfp4_bytes(m, b, t, j->parallel.ep);
        w = gm_add_sat(w, added);
        /* which kernels vLLM takes depends on the install: Marlin without triton_kernels */
        if (added && b != EST_MXFP4_MARLIN) {
            est_assume(e,
                       "vLLM: MXFP4 experts in triton_kernels' %s layout%s (+%.2f GiB a GPU); "
                       "without triton_kernels installed vLLM takes Marlin (+%.2f GiB)",
                       b == EST_MXFP4_TRITON ? "swizzled" : "strided",
                       b == EST_MXFP4_TRITON ? ", the checkpoint's scales kept beside the copies"
                                             : "",
                       (double)added / (double)GM_GIB,
                       (double)est_vllm_mxfp4_bytes(m, EST_MXFP4_MARLIN, t, j->parallel.ep) /
                           (double)GM_GIB);
            est_assume(e, "vLLM swizzles MXFP4 experts on Hopper with PyTorch >= 2.8.1: %s",
                       j->stack.torch ? "PyTorch as --torch-version gives"
                                      : "PyTorch >= 2.8.1 inferred from the vLLM version "
                                        "(0.11.0 pins 2.8.0): give --torch-version");
        }
    }
    if (pp > 1) {
        /* the stage with the most layers and the larger end (embedding, or lm_head) */
        uint64_t ends = gm_mul_div_u64(w, cx->pc.embedding + cx->pc.lm_head, n ? n : 1);
        uint64_t end = gm_mul_div_u64(
            w, vllm_stage_has_embedding(cx) ? cx->pc.embedding : cx->pc.lm_head, n ? n : 1);
        w = gm_add_sat(gm_mul_div_u64(w > ends ? w - ends : 0, layers, m->n_layers), end);
    }
    /* the weights vLLM logs and charges are the allocated bytes its load added
     * (DeviceMemoryProfiler), whole blocks with the rotary cache and Marlin's workspaces: the
     * load's replay where it covers the model (est_vllm_load_allocated) */
    {
        uint64_t alloc = 0;
        if ((st = est_vllm_load(m, cx->quant, vllm_gptq_marlin(cx), t, pp, cx->loads, &alloc,
                                &load_gap, &load_why, err)) != GM_OK)
            return st;
        if (alloc) {
            if (cx->bound == EST_POINT)
                est_assume(e,
                           "vLLM's weights: %.4f GiB allocated after a replay of the load (whole "
                           "blocks of PyTorch's allocator, the rotary cache%s), %+.1f MiB beside "
                           "the stored weights' bytes",
                           (double)alloc / (double)GM_GIB,
                           cx->quant && vllm_gptq_marlin(cx) ? ", Marlin's workspaces" : "",
                           ((double)alloc - (double)w) / (double)GM_MIB);
            w = alloc;
        }
    }
    act = profile_activations(m, T, t);
    if (vllm_awq_plain(cx) && vllm_awq_dequant_peak(m, T, t) > act) {
        act = vllm_awq_dequant_peak(m, T, t);
        est_assume(e,
                   "vLLM's plain AWQ kernel: from 256 tokens each linear's weight is dequantised "
                   "to fp16 for a matmul, at most %.2f GiB (gate_up_proj), in the profile run and "
                   "the CUDA-graph pool",
                   (double)(2 * m->hidden * vllm_awq_widest_cols(m, t)) / (double)GM_GIB);
    }
    /* the sampling GPU samples the whole vocabulary (the logits are gathered over tp): every
     * GPU, or rank 0 alone from 0.2.7 to 0.7 at tp >= 2 (vllm_worker_peak gives the others') */
    sampler_kind = vllm_sampler(j, m);
    per_logit = samplers[sampler_kind].bytes_per_logit;
    sampler = gm_mul_sat(gm_mul_sat(seqs, m->vocab), per_logit);
    sv->sampler_bytes = sampler;
    /* the sampler runs after the forward (whose intermediates are freed by then): the peak
     * is the larger of the forward's and the sampler's over the hidden states it leaves.
     * PyTorch's cuBLAS workspace is allocated in the profile run and kept: the forward's peak
     * holds it where the layers make cuBLAS calls, the sampler's always (from the lm_head's
     * GEMM at the latest, vllm_layers_blas).  It is a component of its own, in both phases:
     * 'ws_peak' is what of it the peak vLLM measures holds, and the budget pays */
    hidden_bytes = gm_mul_sat(gm_mul_sat(T, m->hidden), 2);
    ws = est_torch_cublas_workspace_bytes(cx);
    blas = vllm_layers_blas(cx, T);
    if (gm_add_sat(gm_add_sat(sampler, hidden_bytes), blas ? 0 : ws) > act) {
        act = hidden_bytes;
        ws_peak = ws;
    } else {
        sampler = 0;
        ws_peak = blas ? ws : 0;
    }
    /* a multimodal model's dummy encoder outputs stay through both */
    if (m->vision.kind != GM_VISION_NONE && !vllm_era_v0(era))
        act = gm_add_sat(act, vllm_encoder_cache(cx, T));
    /* the custom all-reduce maps its peers' IPC buffers where it is on (vllm_custom_ar) */
    ca = vllm_custom_ar(cx, &ca_spans);
    /* With PyTorch's symmetric memory enabled (VLLM_ALLREDUCE_USE_SYMM_MEM, PR #20759), vLLM
     * lowers max_size on compute capability 9.0, 10.0 and 10.3 to CUSTOM_ALL_REDUCE_MAX_SIZES
     * per world size (sm 9.0 at tp 8: 256 KiB; CustomAllreduce.__init__, all_reduce_utils.py @
     * vllm-project/vllm 00d618a).  Its default went on (PR #24111, #25070) and off (PR #24696,
     * #26925) more than once, and which releases ship it on is not read: the 8 MiB default is
     * kept, and said, where the table would apply. */
    if (ca && cx->bound == EST_POINT && (j->gpu.sm == 90 || j->gpu.sm == 100 || j->gpu.sm == 103))
        est_assume(e,
                   "vLLM custom all-reduce: max_size 8 MiB assumed (buffers and the inputs it "
                   "reduces); with VLLM_ALLREDUCE_USE_SYMM_MEM on, vLLM lowers it on sm %u.%u per "
                   "tp (CUSTOM_ALL_REDUCE_MAX_SIZES), not modelled",
                   j->gpu.sm / 10, j->gpu.sm % 10);
    kernels = est_vllm_kernel_bytes(j->stack.vllm);
    /* measured, not read in code: said so, as the loss cache block is (docs/estimate.md, "The
     * kernels 0.9.2 to 0.10 count", "The kernels from 0.11") */
    if (era == VLLM_V1_BEFORE_NCCL && !v->non_torch_bytes && cx->bound == EST_POINT)
        est_assume(
            e,
            "vLLM 0.9.2-0.10 non-torch kernels: %.0f MiB measured from one log (row " VLLM_V1_0_10_KERNEL_FIT_ON
            "), not read in code; that row's GPU is not a Hopper one, so version and GPU "
            "are not told apart (0.11 and later: %.0f MiB, before 0.9.2: %.0f MiB); "
            "--non-torch for the job's own",
            (double)kernels / (double)GM_MIB, (double)VLLM_V1_0_11_KERNEL_BYTES / (double)GM_MIB,
            (double)VLLM_KERNEL_BYTES / (double)GM_MIB);
    if ((vllm_era_v0(era) || era == VLLM_V1_GLOBAL) && !v->non_torch_bytes &&
        cx->bound == EST_POINT)
        est_assume(
            e,
            "vLLM before 0.9.2 non-torch kernels: %.0f MiB measured from one log (row " VLLM_V0_KERNEL_FIT_ON
            ": 0.6.4, RTX 3090), not read in code; which kernels "
            "the model, quantisation and GPU load moves it; --non-torch for the job's own",
            (double)kernels / (double)GM_MIB);
    if ((era == VLLM_V1_AFTER_NCCL || era == VLLM_V1_GRAPHS) && !v->non_torch_bytes &&
        cx->bound == EST_POINT)
        est_assume(
            e,
            "vLLM 0.11+ non-torch kernels: %.0f MiB measured from one log (row " VLLM_V1_0_11_KERNEL_FIT_ON
            ": 0.11.0, H100), not read in code; GPU and model move it; --non-torch for the job's own",
            (double)kernels / (double)GM_MIB);
    non_torch =
        v->non_torch_bytes
            ? v->non_torch_bytes
            : gm_add_sat(
                  est_round(est_uncertain(cx, GM_UNCERTAIN_ENGINE, false, (double)kernels,
                                          kernels < 64 * GM_MIB ? 0.0 : 64.0 * (double)GM_MIB,
                                          0.5 * (double)GM_GIB)),
                  ca);
    logged = vllm_non_torch_logged(cx, era, non_torch, v->non_torch_bytes ? 0 : ca, &logged_rank0);
    /* 0.6.4 to 0.6.6 count the load's unreleasable cache too (est_vllm_load_cache_gap) */
    if (vllm_counts_load_cache(j->stack.vllm) && !v->non_torch_bytes) {
        bool marlin = vllm_gptq_marlin(cx);
        uint64_t gap = load_gap; /* the weights' load replayed above */
        const char *why = load_why;
        char ver[16];
        est_version_text(j->stack.vllm, ver, sizeof ver);
        if (why)
            est_assume(e,
                       "vLLM %s counts the cached, unallocated bytes the load leaves in "
                       "PyTorch's allocator as non-torch; the load is not replayed for %s, so "
                       "they are not charged",
                       ver, why);
        if (gap) {
            logged = gm_add_sat(logged, gap);
            est_assume(e,
                       "vLLM %s counts the cache the weights' load leaves in PyTorch's "
                       "allocator as non-torch (allocated, not reserved, bytes subtracted; PR "
                       "#11809 changed that in 0.7): %.1f MiB of partly used segments after "
                       "%sempty_cache(), from a replay of the load",
                       ver, (double)gap / (double)GM_MIB, marlin ? "the Marlin repack and " : "");
        }
    }
    graphs = v->cuda_graph_bytes ? v->cuda_graph_bytes
                                 : vllm_graph_bytes(cx, T, seqs, t, &graph_sizes, &graph_largest,
                                                    &graph_full, graph_ar, &graph_charged);
    /* a pool given outright is what the estimate measured too */
    if (v->cuda_graph_bytes && era == VLLM_V1_GRAPHS)
        graph_charged = graphs;
    if (v->enforce_eager) {
        graphs = 0;
        graph_charged = 0;
    } else {
        graphs = est_round(est_uncertain(cx, GM_UNCERTAIN_ENGINE, false, (double)graphs,
                                         0.5 * (double)graphs, 2.0 * (double)graphs));
        graph_charged =
            est_round(est_uncertain(cx, GM_UNCERTAIN_ENGINE, false, (double)graph_charged,
                                    0.5 * (double)graph_charged, 2.0 * (double)graph_charged));
    }
    sv->cuda_graph_charged_bytes = graph_charged;
    sv->total_bytes = vllm_total_bytes(j);
    budget = (uint64_t)((double)sv->total_bytes * v->gpu_memory_utilization);
    sv->budget_bytes = budget;
    sv->non_torch_bytes = non_torch;
    sv->non_torch_logged_bytes = logged;
    sv->activation_peak_bytes = gm_add_sat(gm_add_sat(act, sampler), ws_peak);
    /* the budget pays what the version counts as non-torch (vllm_non_torch_logged) */
    need = gm_add_sat(gm_add_sat(w, sv->activation_peak_bytes), logged);
    /* 0.3.2 to 0.6.3 charge the segments the profile run reserved (est_vllm_profile_reserve):
     * the forward's reserved peak where it is above the peak already paid (the sampler's phase
     * after it reuses the forward's cached segments) */
    if (era == VLLM_V0_INIT_BASELINE && !v->kv_cache_memory_bytes) {
        uint64_t extra = 0, fwd = profile_activations(m, T, t);
        if ((st = est_vllm_profile_reserve(m, T, t, &extra, err)) != GM_OK)
            return st;
        uint64_t paid = gm_add_sat(act, sampler); /* the peak's tensors, not the workspace */
        extra = gm_add_sat(fwd, extra) > paid ? gm_add_sat(fwd, extra) - paid : 0;
        if (extra) {
            need = gm_add_sat(need, extra);
            est_assume(e,
                       "vLLM 0.3.2-0.6.3 charge the profile run's reserved segments (init_device's "
                       "free memory less the free memory after it): %.0f MiB above its allocated "
                       "peak, from a replay of two layers",
                       (double)extra / (double)GM_MIB);
        }
    }
    /* 0.21 on: the budget pays vLLM's estimate of the graphs, the device the graphs */
    need = gm_add_sat(need, graph_charged);
    pool = budget > need ? budget - need : 0;
    sv->worker_activation_peak_bytes = vllm_worker_peak(j, m, T, seqs, ws, blas);
    if (sv->worker_activation_peak_bytes) {
        /* the other ranks hold no gather receive connections: rank 0's alone */
        uint64_t wlogged = logged > logged_rank0 ? logged - logged_rank0 : 0;
        uint64_t wneed = gm_add_sat(gm_add_sat(w, sv->worker_activation_peak_bytes), wlogged);
        sv->worker_kv_available_bytes = budget > wneed ? budget - wneed : 0;
    }
    if (v->kv_cache_memory_bytes) /* the pool given outright: no profiling decides it */
        pool = v->kv_cache_memory_bytes;
    engine_pool(sv, pool, per_token, bs);
    sv->kv_tokens_logged =
        est_vllm_tokens_logged(m, t, pp, kvb100, pool, bs, sv->kv_tokens, j->stack.vllm);
    engine_weights(cx, w, t, pp > 1);
    if (sampler)
        snprintf(note, sizeof note,
                 "profile run: the hidden states of %llu batched tokens, kept while sampling",
                 (unsigned long long)T);
    else
        snprintf(note, sizeof note, "profile run: %llu batched tokens through one layer, 16-bit",
                 (unsigned long long)T);
    if ((st = est_add(e, GM_KIND_ACTIVATIONS, "activations", act, GM_EST_PHASE_PREFILL, true,
                      GM_EXTENT_ONE_LAYER, note, err)))
        return st;
    snprintf(note, sizeof note, "sampler: %s of %llu sequences' logits, %u B per logit",
             samplers[sampler_kind].what, (unsigned long long)seqs, per_logit);
    if (sampler && (st = est_add(e, GM_KIND_LOGITS, "logits", sampler, GM_EST_PHASE_PREFILL, true,
                                 GM_EXTENT_HEAD, note, err)))
        return st;
    snprintf(note, sizeof note,
             "PyTorch's, from the caching allocator at the profile run's %s and kept: %s the "
             "profile peak",
             blas ? "first layer" : "lm_head GEMM", ws_peak ? "inside" : "after");
    if ((st = est_add(e, GM_KIND_TORCH_WORKSPACE, EST_TORCH_WORKSPACE_NAME, ws,
                      GM_EST_PHASE_INFER_ALL, false, GM_EXTENT_ONE_LAYER, note, err)))
        return st;
    snprintf(note, sizeof note, "%llu blocks of %llu tokens (%llu B per token, %s)",
             (unsigned long long)sv->kv_blocks, (unsigned long long)bs,
             (unsigned long long)per_token, gm_dtype_name(kvt));
    if ((st = est_add(e, GM_KIND_KV_CACHE, "kv_cache", sv->kv_pool_bytes, GM_EST_PHASE_INFER_ALL,
                      false, GM_EXTENT_ALL_LAYERS, note, err)))
        return st;
    if (graphs &&
        (st = est_add(e, GM_KIND_ENGINE_POOL, "cuda_graphs", graphs, GM_EST_PHASE_DECODE, false,
                      GM_EXTENT_ONE_LAYER,
                      era == VLLM_V1_GRAPHS ? "CUDA-graph pool captured after the KV pool; the "
                                              "budget paid vLLM's estimate of it before"
                                            : "CUDA-graph pool captured after the KV pool "
                                              "(outside gpu_memory_utilization)",
                      err)))
        return st;
    if (graphs && era == VLLM_V1_GRAPHS && !v->cuda_graph_bytes)
        est_assume(
            e,
            "vLLM (0.21 on) charges the budget its own estimate of the CUDA graphs, %.1f MiB "
            "(profile_cudagraph_memory: per mode the first capture + (n - 1) x the "
            "second, linear over one shared pool, vLLM issue #45178), against %.1f MiB "
            "captured: the KV pool is %.1f MiB %s for it",
            (double)graph_charged / (double)GM_MIB, (double)graphs / (double)GM_MIB,
            (double)(graph_charged > graphs ? graph_charged - graphs : graphs - graph_charged) /
                (double)GM_MIB,
            graph_charged > graphs ? "smaller" : "larger");
    if (graphs && graph_sizes && vllm_era_v0(era))
        est_assume(e,
                   "vLLM CUDA graphs: %llu batch sizes up to %llu, one full graph each, sharing "
                   "one pool",
                   (unsigned long long)graph_sizes, (unsigned long long)graph_largest);
    else if (graphs && graph_sizes)
        est_assume(e,
                   "vLLM CUDA graphs: %llu batch sizes up to %llu, each in %llu pieces%s, sharing "
                   "one pool",
                   (unsigned long long)graph_sizes, (unsigned long long)graph_largest,
                   (unsigned long long)(est_div_up(m->n_layers, pp) + 1),
                   graph_full ? ", and a full graph for each decode batch up to max_num_seqs" : "");
    for (unsigned p = 0; graphs && p < EST_VLLM_GRAPH_AR_PATHS; p++)
        if (graph_ar[p])
            est_assume(e,
                       "vLLM CUDA graphs at tp %llu: %llu all-reduces captured through %s "
                       "(2 x %llu layers%s in each size's graphs), %.0f KiB each (fit on rows "
                       "of vllm_startup_logs.csv: %s)",
                       (unsigned long long)t, (unsigned long long)graph_ar[p],
                       est_vllm_graph_ar_name((enum est_vllm_graph_ar)p),
                       (unsigned long long)est_div_up(m->n_layers, pp),
                       vllm_stage_has_embedding(cx) ? " + 1" : "",
                       (double)est_vllm_graph_ar_bytes((enum est_vllm_graph_ar)p) / (double)GM_KIB,
                       est_vllm_graph_ar_fit_on((enum est_vllm_graph_ar)p));
    if (graphs && est_vllm_mla_piecewise_only(j))
        est_assume(e,
                   "vLLM: TRITON_MLA below compute capability 9.0 supports no full CUDA graphs "
                   "(cudagraph_mode set to PIECEWISE)%s",
                   j->stack.vllm >= GM_VERSION(0, 17, 0)
                       ? "; PR #42885 (merged 2026-05-18) gave it full graphs, in a release not "
                         "established here: if yours has it, its full decode graphs are missing"
                       : "");
    if (m->kv_lora_rank)
        est_assume(e,
                   "KV cache: MLA latent of %llu + %llu values per token and layer, %s, on every "
                   "GPU (vLLM's MLAAttentionSpec: one latent, not divided by tp)",
                   (unsigned long long)m->kv_lora_rank, (unsigned long long)m->qk_rope_head_dim,
                   gm_dtype_name(kvt));
    else
        est_assume(e, "KV cache: num_key_value_heads=%llu (%llu per GPU), head_dim=%llu, %s",
                   (unsigned long long)m->n_kv_heads, (unsigned long long)kv_heads,
                   (unsigned long long)m->head_dim, gm_dtype_name(kvt));
    if (est_vllm_state_bytes(m, t, j->parallel.pp))
        est_assume(e,
                   "linear attention: %llu %s layers keep a recurrent and a convolution "
                   "state instead of KV, %llu B per request on each GPU (vLLM's MambaSpec), "
                   "spread over a max_model_len request",
                   (unsigned long long)m->n_linear_layers, est_linear_kind(m),
                   (unsigned long long)est_vllm_state_bytes(m, t, j->parallel.pp));
    if (est_vllm_indexer_bytes(m))
        est_assume(e,
                   "DeepSeek-V3.2 indexer keys: %llu B per token and layer (%llu fp8 values + an "
                   "fp32 scale per 128; vLLM's DeepseekV32IndexerCache), on every GPU",
                   (unsigned long long)est_vllm_indexer_bytes(m),
                   (unsigned long long)m->index_head_dim);
    if (est_kv_sliding_layers(m) && m->chunked_attention)
        est_assume(e,
                   "hybrid KV cache manager: %llu chunked-attention layers hold at most %llu + "
                   "%llu tokens per request, so a max_model_len request costs %llu B per token",
                   (unsigned long long)est_kv_sliding_layers(m),
                   (unsigned long long)m->sliding_window, (unsigned long long)T,
                   (unsigned long long)per_token);
    else if (est_kv_sliding_layers(m))
        est_assume(e,
                   "hybrid KV cache manager: %llu sliding-window layers hold at most %llu - 1 + "
                   "%llu tokens per request, so a max_model_len request costs %llu B per token",
                   (unsigned long long)est_kv_sliding_layers(m),
                   (unsigned long long)m->sliding_window, (unsigned long long)T,
                   (unsigned long long)per_token);
    if (v->kv_cache_memory_bytes)
        est_assume(e,
                   "vLLM: the KV pool given (--kv-cache-memory-bytes %llu): the budget does "
                   "not size it",
                   (unsigned long long)v->kv_cache_memory_bytes);
    est_assume(e,
               "vLLM: budget %.2f x total; non-torch memory %llu MiB (%s), %llu MiB "
               "counted by the version; max_num_batched_tokens %llu, max_num_seqs %llu",
               v->gpu_memory_utilization, (unsigned long long)(non_torch >> 20),
               v->non_torch_bytes ? "given"
               : ca               ? "kernels and custom all-reduce buffers"
                                  : "kernels",
               (unsigned long long)(logged >> 20), (unsigned long long)T, (unsigned long long)seqs);
    if (j->gpu.cuda_bytes)
        est_assume(e,
                   "vLLM: total %.2f GiB, what CUDA reports on the %s (nvidia-smi %.2f GiB): "
                   "the budget is that x gpu_memory_utilization",
                   (double)j->gpu.cuda_bytes / (double)GM_GIB, j->gpu.label,
                   (double)j->gpu.memory_bytes / (double)GM_GIB);
    est_assume(e, "vLLM %s: %s", j->stack.vllm ? "as given by --vllm-version" : "current (0.21+)",
               vllm_era_text(era));
    if (sv->worker_activation_peak_bytes)
        est_assume(e,
                   "vLLM 0.2.7 to 0.7: only rank 0 gathers the logits and samples; the other "
                   "ranks' profile peaks at %.2f GiB and they print %.2f GiB of KV memory "
                   "available, but the pool is rank 0's (the smallest)",
                   (double)sv->worker_activation_peak_bytes / (double)GM_GIB,
                   (double)sv->worker_kv_available_bytes / (double)GM_GIB);
    if (pp > 1)
        est_assume(e,
                   "vLLM pipeline of %llu stages: %llu layers per stage with their KV cache; "
                   "the figures are the stage with the larger end",
                   (unsigned long long)pp, (unsigned long long)layers);
    assume_gpus(cx);
    return GM_OK;
}

/* SGLang's defaults for a GPU of 'mib' MiB (sglang memory_hook.handle_gpu_memory_settings):
 * the prefill chunk and the largest decode batch with a CUDA graph. */
static void sglang_defaults(uint64_t mib, uint64_t tp, uint64_t *chunk, uint64_t *max_bs)
{
    if (mib < 20 * 1024) {
        *chunk = 2048;
        *max_bs = 8;
    } else if (mib < 35 * 1024) {
        *chunk = 4096;
        *max_bs = tp < 4 ? 48 : 160;
    } else if (mib < 60 * 1024) {
        *chunk = 4096;
        *max_bs = tp < 4 ? 32 : 160;
    } else if (mib < 160 * 1024) {
        *chunk = 8192;
        *max_bs = tp < 4 ? 256 : 512;
    } else {
        *chunk = 16384;
        *max_bs = 512;
    }
}

/* SGLang's accounting: the static share (weights + token pool) of what is free after the
 * CUDA context and NCCL, the pool whatever the weights leave of it. */
static enum gm_status engine_sglang(struct est_ctx *cx, struct gm_error *err)
{
    const struct gm_job *j = cx->job;
    const struct gm_job_sglang *sg = &j->engine.sglang;
    const struct gm_model *m = cx->m;
    struct gm_estimate *e = cx->e;
    struct gm_est_serving *sv = &e->serving;
    uint64_t t = j->parallel.tp, cap = j->gpu.memory_bytes, mib = cap / GM_MIB, chunk, max_bs,
             free0, w, act, graphs, per_token, static_bytes, pool, outside;
    double mfs, reserved_mib;
    enum gm_dtype kvt;
    char note[GM_EST_NOTE_MAX];
    enum gm_status st;

    if ((st = engine_tp_check(m, t, err)) != GM_OK)
        return st;
    sglang_defaults(mib, t, &chunk, &max_bs);
    if (sg->chunked_prefill_size)
        chunk = sg->chunked_prefill_size;
    /* the default static share: what the heuristic reserves for activations and graphs */
    reserved_mib = 512.0 + 1.5 * (double)(chunk > 2048 ? chunk : 2048) + (double)t / 8.0 * 1024.0 +
                   2.0 * (double)max_bs;
    if (mib > 60 * 1024 && reserved_mib < 10240.0)
        reserved_mib = 10240.0;
    mfs = sg->mem_fraction_static
              ? sg->mem_fraction_static
              : floor(((double)mib - reserved_mib) / (double)mib * 1000.0 + 0.5) / 1000.0;
    if (!(mfs > 0))
        mfs = 0;
    kvt = engine_kv_dtype(j, m);
    per_token = est_round((double)est_kv_layers(m) * est_kv_elems(m, EST_KV_VLLM, t) *
                          (double)kv_elem_bytes_x100(kvt) / 100.0);
    w = est_div_up(cx->stored_weight_bytes, t);
    outside = gm_add_sat(est_cuda_context_bytes(cx), est_nccl_bytes(cx));
    free0 = cap > outside ? cap - outside : 0;
    static_bytes = (uint64_t)(mfs * (double)free0);
    pool = static_bytes > w ? static_bytes - w : 0;
    sv->budget_bytes = static_bytes;
    sv->static_fraction = mfs;
    sv->max_model_len = engine_len(j, m, sg->context_length, &sv->max_model_len_from);
    engine_pool(sv, pool, per_token, 1);
    act = profile_activations(m, chunk, t);
    sv->activation_peak_bytes = act;
    graphs = gm_mul_sat(max_bs, 2 * GM_MIB);

    engine_weights(cx, w, t, false);
    if ((st = est_add_torch_workspaces(cx, err)) != GM_OK)
        return st;
    snprintf(note, sizeof note, "a prefill chunk of %llu tokens through one layer, 16-bit",
             (unsigned long long)chunk);
    if ((st = est_add(e, GM_KIND_ACTIVATIONS, "activations", act, GM_EST_PHASE_PREFILL, true,
                      GM_EXTENT_ONE_LAYER, note, err)))
        return st;
    snprintf(note, sizeof note, "%llu tokens (%llu B per token, %s)",
             (unsigned long long)sv->kv_tokens, (unsigned long long)per_token, gm_dtype_name(kvt));
    if ((st = est_add(e, GM_KIND_KV_CACHE, "kv_cache", sv->kv_pool_bytes, GM_EST_PHASE_INFER_ALL,
                      false, GM_EXTENT_ALL_LAYERS, note, err)))
        return st;
    snprintf(note, sizeof note, "decode CUDA graphs up to batch %llu (2 MiB each)",
             (unsigned long long)max_bs);
    if ((st = est_add(e, GM_KIND_ENGINE_POOL, "cuda_graphs", graphs, GM_EST_PHASE_DECODE, false,
                      GM_EXTENT_ONE_LAYER, note, err)))
        return st;
    est_assume(e,
               "SGLang: mem_fraction_static %.3f%s of the %.2f GiB free after the CUDA context "
               "and NCCL holds the weights and the token pool (profile_max_num_token)",
               mfs, sg->mem_fraction_static ? " (given)" : " (its default for this GPU)",
               (double)free0 / (double)GM_GIB);
    est_assume(e,
               "SGLang: chunked_prefill_size %llu, decode CUDA graphs up to batch %llu; KV "
               "cache: num_key_value_heads=%llu, head_dim=%llu, %s, page size 1",
               (unsigned long long)chunk, (unsigned long long)max_bs,
               (unsigned long long)m->n_kv_heads, (unsigned long long)m->head_dim,
               gm_dtype_name(kvt));
    assume_gpus(cx);
    return GM_OK;
}

/* Cells of llama.cpp's sliding-window cache (llama_kv_cache_iswa, src/llama-kv-cache-iswa.cpp
 * at 2aef976): GGML_PAD(n_swa x (unified ? n_seq_max : 1) + n_ubatch, 256), at most the full
 * cache; llama-server's slots share one unified cache, so every sequence keeps its window. */
static uint64_t llamacpp_swa_cells(const struct gm_model *m, uint64_t cells, uint64_t n_seq,
                                   uint64_t n_ubatch)
{
    uint64_t c = gm_add_sat(gm_mul_sat(m->sliding_window, n_seq ? n_seq : 1), n_ubatch);
    c = (c + 255) / 256 * 256;
    return c < cells ? c : cells;
}

/* The layers llama.cpp gives a window cache: gemma-2/3, gpt-oss's standard windows and
 * Llama-4's chunks of 8192 (the architectures whose hparams.swa_type llama-model.cpp sets). */
static uint64_t llamacpp_swa_layers(const struct gm_model *m)
{
    if (!(m->arch == GM_ARCH_GEMMA2 || m->arch == GM_ARCH_GEMMA3 || m->arch == GM_ARCH_GPT_OSS ||
          m->arch == GM_ARCH_LLAMA4))
        return 0;
    return est_kv_sliding_layers(m);
}

/* KV bytes of llama.cpp's cache over 'cells' cells of 'n_seq' sequences with micro-batches
 * of 'n_ubatch' tokens: every layer at ggml type 'ggml_type', the window layers capped. */
static enum gm_status llamacpp_kv(const struct gm_model *m, uint32_t ggml_type, uint64_t cells,
                                  uint64_t n_seq, uint64_t n_ubatch, uint64_t *bytes,
                                  struct gm_error *err)
{
    uint64_t k, v, k_bytes, v_bytes = 0, layers = est_kv_layers(m), sliding;
    est_kv_rows(m, EST_KV_LLAMACPP, 1, &k, &v);
    if (!gm_ggml_type_bytes(ggml_type, k, &k_bytes, NULL) ||
        (v && !gm_ggml_type_bytes(ggml_type, v, &v_bytes, NULL)))
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "KV cache type %u cannot hold rows of %llu elements", ggml_type,
                       (unsigned long long)k);
    sliding = llamacpp_swa_layers(m);
    *bytes = gm_add_sat(gm_mul_sat(gm_mul_sat(layers - sliding, k_bytes + v_bytes), cells),
                        gm_mul_sat(gm_mul_sat(sliding, k_bytes + v_bytes),
                                   sliding ? llamacpp_swa_cells(m, cells, n_seq, n_ubatch) : 0));
    return GM_OK;
}

enum gm_status gm_llamacpp_kv_bytes(const struct gm_model *m, uint32_t ggml_type, uint64_t tokens,
                                    uint64_t *bytes, struct gm_error *err)
{
    return llamacpp_kv(m, ggml_type, tokens, 1, 512, bytes, err);
}

/* Bytes of the input embedding, which llama.cpp keeps in host memory: the GGUF tensor
 * when the files have one, else from the model's sizes. */
static uint64_t input_embedding_bytes(const struct est_ctx *cx, uint64_t w)
{
    const struct gm_modelfile *f = cx->job->model.files;
    uint64_t embd = 0;
    if (f && f->format == GM_MODELFILE_GGUF)
        for (size_t i = 0; i < f->n_tensors; i++)
            if (strcmp(f->tensors[i].name, "token_embd.weight") == 0)
                embd = f->tensors[i].n_bytes;
    /* a weight format (MXFP4, GPTQ, AWQ, bitsandbytes) keeps the embedding in its 16- or
     * 32-bit float type; else the embedding has the weights' mean width */
    if (!embd && cx->quant && cx->quant->method != GM_QUANT_GGUF)
        embd = est_round((double)gm_mul_sat(cx->m->vocab, cx->m->hidden) * cx->stored_bits / 8.0);
    if (!embd)
        embd = gm_mul_div_u64(gm_mul_sat(cx->m->vocab, cx->m->hidden), w, cx->n ? cx->n : 1);
    return embd > w ? w : embd;
}

/* Bytes of the GGUF tensors whose names start with 'prefix' and hold 'part' ("blk.3." and
 * "_exps."), 0 without GGUF files. */
static uint64_t gguf_bytes(const struct est_ctx *cx, const char *prefix, const char *part)
{
    const struct gm_modelfile *f = cx->job->model.files;
    uint64_t b = 0;
    if (f && f->format == GM_MODELFILE_GGUF)
        for (size_t i = 0; i < f->n_tensors; i++)
            if (!strncmp(f->tensors[i].name, prefix, strlen(prefix)) &&
                (!part || strstr(f->tensors[i].name, part)))
                b = gm_add_sat(b, f->tensors[i].n_bytes);
    return b;
}

/* The routed experts of layer 'layer' as stored: the GGUF's ffn_*_exps tensors, else their
 * share of the weights (n_experts x 3 x hidden x expert width parameters). */
static uint64_t layer_expert_bytes(const struct est_ctx *cx, uint64_t w, uint64_t layer)
{
    const struct gm_model *m = cx->m;
    char prefix[32];
    uint64_t b, width = m->moe_intermediate ? m->moe_intermediate : m->intermediate;
    snprintf(prefix, sizeof prefix, "blk.%llu.", (unsigned long long)layer);
    if ((b = gguf_bytes(cx, prefix, "_exps.")))
        return b;
    if (!m->n_experts || layer >= m->n_layers || layer < m->n_layers - est_moe_layers(m))
        return 0;
    return gm_mul_div_u64(w, gm_mul_sat(gm_mul_sat(m->n_experts, 3 * m->hidden), width),
                          cx->n ? cx->n : 1);
}

/* llama.cpp's recurrent memory (llama_memory_recurrent, "RS buffer"): per sequence cell and
 * Mamba layer an f32 convolution state of (d_conv - 1) x (d_inner + 2 groups x d_state) and
 * an f32 SSM state of d_state x d_inner (hparams n_embd_r / n_embd_s), as its log prints
 * them: Falcon-H1-1.5B at 24 layers "R 0.98 + S 72.00" MiB.  Gated DeltaNet layers are not
 * read there yet: none counted. */
static uint64_t llamacpp_recurrent_bytes(const struct gm_model *m, uint64_t cells)
{
    uint64_t rec, conv;
    if (!m->mamba_d_inner)
        return 0;
    gm_model_linear_state(m, true, &rec, &conv);
    return gm_mul_sat(gm_mul_sat(cells, m->n_linear_layers), (rec + conv) * 4);
}

/* Bytes of the output projection as stored: the GGUF's output.weight (token_embd for a tied
 * model, which llama.cpp loads a second time as the output tensor, TENSOR_DUPLICATED in
 * llama-model.cpp), else vocab x hidden at the file's width: llama-quant.cpp
 * (llama_tensor_get_type) stores it as Q6_K (210 B per 256) in every file type below 8 bits
 * per weight, and as the rest of the weights in Q8_0 and the float types. */
static uint64_t output_weight_bytes(const struct est_ctx *cx, uint64_t embd)
{
    const struct gm_model *m = cx->m;
    uint64_t out = gguf_bytes(cx, "output.", NULL), n = gm_mul_sat(m->vocab, m->hidden);
    if (out)
        return out;
    if (m->tied_embeddings && embd)
        return embd;
    if (cx->weights_from_files)
        return gm_mul_div_u64(n, cx->stored_weight_bytes, cx->n ? cx->n : 1);
    if (cx->stored_bits < 8)
        return gm_mul_div_u64(n, 210, 256);
    return est_round((double)n * cx->stored_bits / 8.0);
}

/* Where llama.cpp puts the layers for -ngl N (src/llama-model.cpp, load_tensors): since PR
 * #18148 (December 2025) N counts the output layer first and then the repeating layers from
 * the last one down, i_gpu_start = max(n_layer + 1 - N, 0); before it, and in ollama's runner,
 * the repeating layers came first, i_gpu_start = max(n_layer - N, 0), and the output layer
 * only with N > n_layer.  'on' is the repeating layers on the GPU. */
static void llamacpp_placement(const struct gm_job_llamacpp *lc, uint64_t L, uint64_t *on,
                               bool *output_on)
{
    uint64_t n = lc->n_gpu_layers;
    if (lc->ngl_output_last) {
        *on = n < L ? n : L;
        *output_on = n > L;
        return;
    }
    *output_on = n >= 1;
    *on = n >= 1 ? (n - 1 < L ? n - 1 : L) : 0;
}

uint64_t est_llamacpp_compute_bytes(const struct est_llamacpp_graph *g)
{
    const uint64_t f32 = 4, ub = g->n_ubatch;
    uint64_t mask, attn = 0, ffn = 0, out = 0, host = 0, act, best;
    bool offloads = ub >= 32;
    /* the mask of the whole cache, f32, and with flash attention its f16 cast */
    mask = gm_mul_sat(gm_mul_sat(g->cells, ub), g->flash_attn ? f32 + 2 : f32);
    if (g->layers_on_gpu) {
        /* attention: the layer input, q, k and v, and the scores of every head (softmax in
         * place), or flash attention's output instead of the scores */
        act = gm_mul_sat(gm_mul_sat(ub, f32),
                         gm_add_sat(g->hidden, gm_add_sat(g->q_width, 2 * g->kv_width)));
        attn = gm_add_sat(gm_add_sat(mask, act),
                          g->flash_attn
                              ? gm_mul_sat(gm_mul_sat(ub, f32), g->q_width)
                              : gm_mul_sat(gm_mul_sat(g->cells, ub), gm_mul_sat(g->heads, f32)));
        /* MLP: the residual and the normed input, gate, up and their product */
        ffn = gm_add_sat(gm_add_sat(mask, gm_mul_sat(gm_mul_sat(ub, f32), 2 * g->hidden)),
                         gm_mul_sat(gm_mul_sat(ub, f32), gm_mul_sat(3, g->ff)));
    }
    /* the logits of every token of the micro-batch (graph_reserve asks for n_ubatch outputs)
     * and the normed hidden states they are projected from; an output weight in host memory
     * is copied in for the matmul when the backend offloads it (ggml-backend.cpp: a weight in
     * a host buffer, offload_op true: CUDA from 32 rows of the batch) */
    if (g->output_on_gpu || (g->host_output_bytes && offloads))
        out = gm_add_sat(gm_mul_sat(gm_mul_sat(ub, f32), gm_add_sat(g->vocab, g->hidden)),
                         g->output_on_gpu ? 0 : g->host_output_bytes);
    /* a layer left in host memory: its matmuls are offloaded the same way, one weight copied
     * in with the matmul's input and output */
    if (g->host_layer_bytes && offloads)
        host = gm_add_sat(g->host_layer_bytes,
                          gm_mul_sat(gm_mul_sat(ub, f32), gm_add_sat(g->hidden, g->ff)));
    best = attn > ffn ? attn : ffn;
    best = best > out ? best : out;
    return best > host ? best : host;
}

/* Whether llama.cpp builds the model's graph as one of the builders est_llamacpp_placed_bytes()
 * lays out (llm_build_llama, llm_build_qwen2, llm_build_gptneox), and which. */
static bool llamacpp_placed_layout(const struct gm_model *m, enum est_llamacpp_layout *layout)
{
    *layout = m->arch == GM_ARCH_GPT_NEOX ? EST_LLAMACPP_NEOX : EST_LLAMACPP_LLAMA;
    return m->arch == GM_ARCH_LLAMA || m->arch == GM_ARCH_MISTRAL || m->arch == GM_ARCH_QWEN2 ||
           m->arch == GM_ARCH_GPT_NEOX;
}

static enum gm_status engine_llamacpp(struct est_ctx *cx, struct gm_error *err)
{
    const struct gm_job *j = cx->job;
    const struct gm_job_llamacpp *lc = &j->engine.llamacpp;
    const struct gm_model *m = cx->m;
    struct gm_estimate *e = cx->e;
    struct est_llamacpp_graph g = {0};
    uint64_t w = cx->stored_weight_bytes, embd, kv, rs, ctx, ub, compute, out, experts = 0,
             batch = j->workload.batch ? j->workload.batch : 1, gpu_weights, host_layers, body,
             L = m->n_layers ? m->n_layers : 1, on, kv_layers = est_kv_layers(m), cells,
             pad = lc->flash_attn || !lc->kv_cpy ? 256 : 32;
    bool output_on, placed;
    const char *kvname = "f16";
    uint32_t kv_type = 1;
    char note[GM_EST_NOTE_MAX];
    enum gm_status st;

    if (!est_llamacpp_kv_type(j->numerics.kv_dtype, &kv_type))
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "--engine llama.cpp has no KV cache type for --kv-dtype %s",
                       gm_dtype_name(j->numerics.kv_dtype));
    embd = input_embedding_bytes(cx, w);
    ctx = gm_mul_sat(gm_add_sat(j->workload.context, j->workload.new_tokens), batch);
    ub = lc->n_ubatch ? lc->n_ubatch : 512;
    if (ub > ctx)
        ub = ctx;
    /* llama.cpp pads n_ctx once and sizes both the cache and the reserved graph's masks and
     * scores by it: to 256 cells since PR #17046 (November 2025); before it to
     * llama_kv_cache::get_padding(), 256 with flash attention and 32 without (a --kv-cpy
     * build predates it).  n_ctx is a uint32_t there. */
    cells = gm_add_sat(ctx, pad - 1) / pad * pad;
    if (cells > UINT32_MAX)
        return gm_fail(err, GM_ERR_LIMIT, GM_NO_OFFSET,
                       "--engine llama.cpp: n_ctx of %llu cells is past llama.cpp's 32-bit n_ctx",
                       (unsigned long long)cells);
    if ((st = llamacpp_kv(m, kv_type, cells, batch, ub, &kv, err)))
        return st;
    /* the layers on the GPU carry their KV cache; the experts of the first --n-cpu-moe layers
     * stay in host memory */
    llamacpp_placement(lc, L, &on, &output_on);
    out = output_weight_bytes(cx, embd);
    if (out > w)
        out = w;
    /* the repeating layers' weights: neither the embedding nor an untied output weight */
    body =
        w - embd > (m->tied_embeddings ? 0 : out) ? w - embd - (m->tied_embeddings ? 0 : out) : 0;
    gpu_weights = gm_add_sat(gm_mul_div_u64(body, on, L), output_on ? out : 0);
    kv = gm_mul_div_u64(kv, on, L);
    rs = gm_mul_div_u64(llamacpp_recurrent_bytes(m, batch), on, L);
    for (uint64_t i = 0; i < lc->n_cpu_moe && i < on; i++)
        experts = gm_add_sat(experts, layer_expert_bytes(cx, w, i));
    gpu_weights = gpu_weights > experts ? gpu_weights - experts : 0;
    host_layers = L - on;
    (void)gm_ggml_type_bytes(kv_type, 0, &(uint64_t){0}, &kvname);

    g.n_ubatch = ub;
    g.cells = cells;
    g.hidden = m->hidden;
    g.q_width = gm_mul_sat(m->n_heads, m->head_dim);
    g.kv_width = gm_mul_sat(m->n_kv_heads, m->head_dim);
    g.heads = m->n_heads;
    g.ff = m->n_experts && m->n_experts_active
               ? gm_mul_sat(m->moe_intermediate ? m->moe_intermediate : m->intermediate,
                            gm_add_sat(m->n_experts_active, m->n_shared_experts))
               : m->intermediate;
    g.vocab = m->vocab;
    g.flash_attn = lc->flash_attn;
    g.layers_on_gpu = on > 0 && kv_layers > 0;
    g.output_on_gpu = output_on;
    g.host_output_bytes = output_on ? 0 : out;
    if (host_layers) {
        /* a layer's largest matrix, at the layer's bytes per parameter: the MLP's (all
         * routed experts in one tensor for a MoE layer) */
        uint64_t width = m->moe_intermediate ? m->moe_intermediate : m->intermediate,
                 big = m->n_experts ? gm_mul_sat(m->n_experts, gm_mul_sat(m->hidden, width))
                                    : gm_mul_sat(m->hidden, m->intermediate),
                 layer_params = gm_add_sat(
                     gm_mul_sat(m->hidden, gm_mul_sat(2, gm_add_sat(g.q_width, g.kv_width))),
                     gm_mul_sat(3, big)),
                 layer_bytes = body / L;
        g.host_layer_bytes = layer_params ? gm_mul_div_u64(layer_bytes, big, layer_params) : 0;
    }
    g.n_layers = L;
    g.head_dim = m->head_dim;
    g.qkv_bias = m->qkv_bias;
    g.kv_cpy = lc->kv_cpy;
    placed = llamacpp_placed_layout(m, &g.layout) && !host_layers && output_on && !m->n_experts;
    if (placed) {
        if ((st = est_llamacpp_placed_bytes(&g, &compute, err)))
            return st;
    } else {
        compute = est_llamacpp_compute_bytes(&g);
    }
    /* the sum leaves out where ggml-alloc's free list puts the last tensors, and the placed
     * graph is one build's node order: the range spans -25% to +50% */
    compute = est_round(est_uncertain(cx, GM_UNCERTAIN_ENGINE, false, (double)compute,
                                      0.75 * (double)compute, 1.5 * (double)compute));
    e->serving.compute_buffer_bytes = compute;
    e->serving.kv_bytes_per_token = cells ? kv / cells : 0;
    e->serving.n_ctx = ctx;

    for (size_t i = 0; i < e->n_components; i++) {
        struct gm_est_component *c = &e->components[i];
        if (c->kind != GM_KIND_WEIGHTS)
            continue;
        c->bytes = gpu_weights;
        snprintf(c->note, sizeof c->note,
                 "GGUF tensors on the GPU (%llu B of token_embd stay in host memory)",
                 (unsigned long long)embd);
    }
    snprintf(note, sizeof note, "n_ctx %llu cells at %s", (unsigned long long)cells, kvname);
    if ((st = est_add(e, GM_KIND_KV_CACHE, "kv_cache", kv, GM_EST_PHASE_INFER_ALL, false,
                      GM_EXTENT_ALL_LAYERS, note, err)))
        return st;
    if (rs) {
        snprintf(note, sizeof note,
                 "%llu Mamba layers x %llu sequences: f32 conv (d_conv - 1) and SSM states",
                 (unsigned long long)m->n_linear_layers, (unsigned long long)batch);
        if ((st = est_add(e, GM_KIND_KV_CACHE, "recurrent_state", rs, GM_EST_PHASE_INFER_ALL, false,
                          GM_EXTENT_ALL_LAYERS, note, err)))
            return st;
    }
    snprintf(note, sizeof note, "ggml graph of one %llu-token micro-batch%s",
             (unsigned long long)ub, lc->flash_attn ? " (flash attention)" : "");
    if ((st = est_add(e, GM_KIND_ENGINE_POOL, "compute_buffer", compute, GM_EST_PHASE_INFER_ALL,
                      false, GM_EXTENT_ONE_LAYER, note, err)))
        return st;
    est_assume(e, "llama.cpp does not use PyTorch: \"allocated\" and \"reserved\" are "
                  "its ggml buffers (weights, KV cache, compute buffer)");
    if (host_layers || !output_on)
        est_assume(e,
                   "llama.cpp: %llu of %llu layers on the GPU (-ngl %llu, %s), their KV cache "
                   "with them; the rest in host memory%s",
                   (unsigned long long)on, (unsigned long long)m->n_layers,
                   (unsigned long long)lc->n_gpu_layers,
                   lc->ngl_output_last ? "the output layer last" : "the output layer first",
                   output_on ? "" : ", the output weight copied in for each micro-batch");
    if (experts && lc->n_cpu_moe >= m->n_layers)
        est_assume(e,
                   "llama.cpp: %.2f GiB of routed experts in host memory (--cpu-moe: all layers)",
                   (double)experts / (double)GM_GIB);
    else if (experts)
        est_assume(e, "llama.cpp: %.2f GiB of routed experts in host memory (--n-cpu-moe %llu)",
                   (double)experts / (double)GM_GIB, (unsigned long long)lc->n_cpu_moe);
    est_assume(e,
               "llama.cpp: %s, n_ctx = %llu tokens (%llu sequences x %llu), KV type %s, "
               "n_ubatch %llu; the compute buffer is %s",
               host_layers ? "layers split with the host" : "every layer offloaded (-ngl 999)",
               (unsigned long long)ctx, (unsigned long long)batch,
               (unsigned long long)(j->workload.context + j->workload.new_tokens), kvname,
               (unsigned long long)ub,
               placed ? "where ggml-alloc places the reserved graph's tensors, in order"
                      : "the largest set of the reserved graph's tensors alive at once");
    if (!placed && lc->kv_cpy)
        est_assume(e, "llama.cpp: --kv-cpy ignored: it changes only the placed compute buffer "
                      "(llama, mistral, qwen2, GPT-NeoX fully offloaded, no MoE)");
    return GM_OK;
}

enum gm_status est_stage_engine(struct est_ctx *cx, struct gm_error *err)
{
    if (cx->job->mode != GM_EST_INFER)
        return GM_OK;
    switch (cx->job->engine.kind) {
    case GM_ENGINE_VLLM:
        return engine_vllm(cx, err);
    case GM_ENGINE_LLAMACPP:
        return engine_llamacpp(cx, err);
    case GM_ENGINE_SGLANG:
        return engine_sglang(cx, err);
    case GM_ENGINE_HF:
        est_assume(cx->e, "transformers generate(): weights, KV cache of every "
                          "sequence, prefill activations and logits");
        return GM_OK;
    default:
        return GM_OK;
    }
}
