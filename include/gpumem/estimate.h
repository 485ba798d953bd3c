/* SPDX-License-Identifier: MIT */
/* estimate.h - predict the GPU memory of a training or inference job before launching it.
 *
 * One job description, one pipeline, one fit verdict, one suggestion engine:
 *
 *   struct gm_job job;                      the job, in sub-structs (model, workload,
 *   gm_job_init(&job);                      numerics, memory techniques, parallel layout,
 *   gm_job_set(&job, "batch", "4", &err);   serving engine, runtime overheads, GPU); set
 *   ...                                     fields directly or by setting name (the table
 *                                           gm_job_settings() is the CLI's option table)
 *   struct gm_estimate *est = NULL;
 *   gm_estimate_run(&job, &est, &err);      the pipeline: model and weights -> training or
 *                                           inference -> adapters -> parallel layout ->
 *                                           pipeline stages -> serving engine -> runtime
 *                                           overheads, the three figures and the fit
 *   gm_estimate_free(est);                  (results are the library's to allocate)
 *
 * The result is a list of components, each with a typed kind (enum gm_est_kind), the
 * phases during which it is live and its bytes on one device; the peak of each phase; the
 * three predicted figures named as users see them
 *   peak allocated  torch.cuda.max_memory_allocated()
 *   peak reserved   torch.cuda.max_memory_reserved() (allocator rounding, fragmentation)
 *   device used     what nvidia-smi shows for the process (adds what lives outside the
 *                   caching allocator: CUDA context, workspaces, NCCL, engine overheads)
 * per device group; the fit verdict with its reason; and every assumption as a sentence.
 * gm_estimate_report_run() adds the searches (--max-batch, --max-context, with the limit
 * that binds), DeepSpeed's own estimator, the suggestions and, for a serving job that fits,
 * the engine's command line (gm_estimate_plan(); gm_job_read_command() reads one back), and
 * gm_estimate_report_json() writes the document that `gpumem estimate --json` prints.
 * Formulas and sources: docs/estimate.md.
 *
 * Extension points (each one new value, field, stage or table row): a new technique is a
 * field of a job sub-struct with its setting in the settings table; a new kind of memory
 * is a value of enum gm_est_kind (with its category in gm_est_kind_category()); a new step
 * of the computation is a stage in src/estimate/driver.c; a new "what to change" is a row
 * of the candidate table in src/estimate/suggest.c. */
#ifndef GPUMEM_ESTIMATE_H
#define GPUMEM_ESTIMATE_H

#include "gpumem/alloc.h"
#include "gpumem/analysis.h"
#include "gpumem/error.h"
#include "gpumem/model.h"
#include "gpumem/modelfile.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif
#pragma GCC visibility push(default) /* the public API (gpumem.h) */

#define GM_EST_NAME_MAX 48  /* a component's name, with its NUL */
#define GM_EST_NOTE_MAX 200 /* a note, an assumption, a sentence, with its NUL */

/* ---- the job ---- */

enum gm_est_mode {
    GM_EST_WEIGHTS = 0, /* weights only (+ an optional flat reserve) */
    GM_EST_TRAIN,
    GM_EST_INFER,
    GM_EST_MODE__COUNT
};

enum gm_method {
    GM_METHOD_ARCH = 0,  /* per-tensor accounting from the model's architecture */
    GM_METHOD_BLOG,      /* HF blog: N*P + 2NP + max(2NP, A*B*L*P) */
    GM_METHOD_DEEPSPEED, /* arch, plus DeepSpeed's own ZeRO model-state estimator */
    GM_METHOD__COUNT
};

enum gm_precision {
    GM_PREC_FP32 = 0,   /* everything fp32 */
    GM_PREC_FP16_MIXED, /* torch autocast fp16: fp32 weights/grads/state, fp16 activations */
    GM_PREC_BF16_MIXED, /* torch autocast bf16 */
    GM_PREC_BF16,       /* pure bf16: weights, grads and optimizer state in bf16 */
    GM_PREC__COUNT
};

/* How the weights are stored for inference and weights-only estimates. */
enum gm_weight_format {
    GM_WEIGHTS_AS_STORED = 0, /* the model files' bytes, else torch_dtype, else 16 bit */
    GM_WEIGHTS_BITS,          /* every weight at numerics.weight_bits bits */
    /* ---- weight formats (bitsandbytes, GPTQ, AWQ, FP8) ---- */
    GM_WEIGHTS_QUANT, /* numerics.quant: a weight format (bitsandbytes, GPTQ, AWQ, FP8) */
    GM_WEIGHTS__COUNT
};

enum gm_optimizer {
    GM_OPT_ADAMW = 0,
    GM_OPT_ADAM,
    GM_OPT_SGD,
    GM_OPT_SGD_MOMENTUM,
    GM_OPT_ADAMW_8BIT,
    GM_OPT_ADAFACTOR,
    GM_OPT_LION,
    GM_OPT__COUNT
};

/* How the optimizer step walks the parameters (decides the step temporaries). */
enum gm_optim_impl {
    GM_OPTIM_FOREACH = 0, /* torch default on CUDA: one temporary the size of all params */
    GM_OPTIM_FUSED,       /* fused kernel: no temporaries */
    GM_OPTIM_FOR_LOOP,    /* one parameter at a time: temporaries of the largest tensor */
    GM_OPTIM__COUNT
};

/* When gradients are released: PyTorch >= 2.0 zero_grad() frees them (set_to_none), so
 * they do not coexist with the next forward's activations; older code kept them. */
enum gm_zero_grad { GM_ZERO_GRAD_SET_TO_NONE = 0, GM_ZERO_GRAD_ZEROS, GM_ZERO_GRAD__COUNT };

enum gm_ckpt {
    GM_CKPT_NONE = 0,
    GM_CKPT_FULL,      /* every decoder layer recomputed in backward */
    GM_CKPT_SELECTIVE, /* Korthikanti et al.: only the attention core is recomputed */
    GM_CKPT_OP,        /* torchtitan op-level SAC: every other matmul output and the
                          attention output kept, the rest recomputed */
    GM_CKPT__COUNT
};

/* ---- memory techniques of modern training stacks (docs/estimate.md, "Memory techniques") ---- */

/* How the loss over the vocabulary is computed. */
enum gm_loss {
    GM_LOSS_FULL = 0,         /* HF ForCausalLMLoss: all B*L logits upcast to fp32, log-softmax */
    GM_LOSS_CHUNKED,          /* torchtune LinearCrossEntropyLoss: projection + CE per chunk */
    GM_LOSS_FUSED,            /* a cross-entropy kernel on the 16-bit logits, gradient in place
                                 (Liger LigerCrossEntropyLoss, unsloth fast_cross_entropy) */
    GM_LOSS_FUSED_LINEAR,     /* Liger fused linear cross-entropy / Cut Cross-Entropy: the
                                 logits are never materialised beyond one chunk */
    GM_LOSS_PLAIN,            /* a custom loop's F.cross_entropy on the shifted copy of the
                                 compute-dtype logits: no upcast of its own (autocast's only) */
    GM_LOSS_CHUNKED_BACKWARD, /* torchtitan ChunkedCELoss: the projection, the fp32 loss and
                                 its backward one chunk at a time, the head's gradient taken
                                 per chunk, before the layers' backward */
    GM_LOSS_COMPILED,         /* a training loop's F.cross_entropy on the upcast logits under
                                 torch.compile (torchtitan with --compile): no fp32 copies, the
                                 logits kept by the compiled graph, a new 16-bit gradient */
    GM_LOSS__COUNT
};

/* Which fused linear-cross-entropy kernel runs --loss fused-linear (each has its own chunk
 * rule), and which cross-entropy kernel runs --loss fused (Liger or unsloth: the same
 * allocations read in code; unsloth adds the cache block measured on FOAK runs). */
enum gm_loss_impl {
    GM_LOSS_IMPL_LIGER = 0, /* Liger LigerFusedLinearCrossEntropy: row chunks of logits;
                               --loss fused: LigerCrossEntropyLoss, or any kernel that writes
                               the gradient into the logits (the default: no measured block) */
    GM_LOSS_IMPL_CCE,       /* Apple Cut Cross-Entropy: logits only in on-chip blocks */
    GM_LOSS_IMPL_UNSLOTH,   /* unsloth_zoo unsloth_fused_ce_loss: token chunks of at most 4 GiB
                               of fp32 logits, a multiple of 4 of them; --loss fused: unsloth's
                               Fast_CrossEntropyLoss as fms-acceleration's FOAK vendors it */
    GM_LOSS_IMPL_CUTILE,    /* NVIDIA TileGym's cuTile fused_linear_cross_entropy: 4096-row
                               chunks through one reused logits buffer, the input's gradient
                               and an fp32 lm_head gradient made in the forward */
    GM_LOSS_IMPL__COUNT
};

/* Fused kernels replacing eager HF modules (Liger-Kernel, unsloth). */
enum gm_fused {
    GM_FUSED_RMS_NORM = 1 << 0, /* saves its input and rstd, no fp32 copy */
    GM_FUSED_SWIGLU = 1 << 1,   /* SwiGLU / GeGLU: saves gate and up, not act(gate) */
    GM_FUSED_ROPE = 1 << 2,     /* in-place rotation: forward temporaries only */
    GM_FUSED_LORA = 1 << 3      /* unsloth's fused LoRA autograd functions (FOAK fused_lora):
                                 * the adapters keep only the dropped-out input */
};
#define GM_FUSED_ALL (GM_FUSED_RMS_NORM | GM_FUSED_SWIGLU | GM_FUSED_ROPE)

enum gm_attention {
    GM_ATTN_SDPA = 0, /* SDPA / flash: the s*s scores are never stored */
    GM_ATTN_EAGER,    /* scores and probabilities materialised and saved for backward */
    GM_ATTN__COUNT
};

enum gm_adapter {
    GM_ADAPTER_NONE = 0, /* full training */
    GM_ADAPTER_LORA,     /* frozen base in the compute dtype, trainable low-rank adapters */
    GM_ADAPTER_QLORA,    /* frozen base in NF4 (bitsandbytes), adapters in bf16 compute */
    GM_ADAPTER__COUNT
};

/* Linear layers an adapter can target (PEFT's names). */
enum gm_lora_target {
    GM_LORA_Q = 1 << 0,
    GM_LORA_K = 1 << 1,
    GM_LORA_V = 1 << 2,
    GM_LORA_O = 1 << 3,
    GM_LORA_GATE = 1 << 4,
    GM_LORA_UP = 1 << 5,
    GM_LORA_DOWN = 1 << 6,
    GM_LORA_QKV = 1 << 7 /* one fused q/k/v projection (c_attn, query_key_value, qkv_proj) */
};
/* Targets whose linears read the attention block's input. */
#define GM_LORA_QKV_IN     (GM_LORA_Q | GM_LORA_K | GM_LORA_V | GM_LORA_QKV)
#define GM_LORA_MLP        (GM_LORA_GATE | GM_LORA_UP | GM_LORA_DOWN)
#define GM_LORA_ATTENTION  (GM_LORA_Q | GM_LORA_K | GM_LORA_V | GM_LORA_O)
#define GM_LORA_ALL_LINEAR (GM_LORA_ATTENTION | GM_LORA_GATE | GM_LORA_UP | GM_LORA_DOWN)

enum gm_shard {
    GM_SHARD_NONE = 0, /* plain data parallel (DDP) when gpus > 1 */
    GM_SHARD_ZERO1,    /* optimizer state (and fp32 master) partitioned */
    GM_SHARD_ZERO2,    /* + gradients */
    GM_SHARD_ZERO3,    /* + parameters, gathered layer by layer */
    GM_SHARD_FSDP,     /* PyTorch FSDP FULL_SHARD: like ZeRO-3, unit = one decoder layer */
    GM_SHARD__COUNT
};

/* The pipeline schedule (torch.distributed.pipelining), training with --pp. */
enum gm_pp_schedule {
    GM_PP_1F1B = 0,         /* Schedule1F1B: one stage per rank */
    GM_PP_INTERLEAVED_1F1B, /* ScheduleInterleaved1F1B: looped stages, several per rank */
    GM_PP__COUNT
};

enum gm_engine {
    GM_ENGINE_NONE = 0, /* the plain inference estimate (what generate() holds) */
    GM_ENGINE_HF,       /* transformers generate() */
    GM_ENGINE_VLLM,
    GM_ENGINE_LLAMACPP,
    GM_ENGINE_SGLANG,
    GM_ENGINE__COUNT
};

/* What gm_estimate_report_run() searches for (--max-batch, --max-context). */
enum gm_search {
    GM_SEARCH_NONE = 0,
    GM_SEARCH_BATCH,        /* largest micro-batch / concurrent sequences that fit */
    GM_SEARCH_CONTEXT,      /* largest --seq (training) or --context (inference) that fits */
    GM_SEARCH_MAX_MODEL_LEN /* vLLM: largest max_model_len that starts, context unchanged */
};

/* What the job runs on, and how big it is. */
struct gm_job_model {
    const struct gm_model *model;     /* borrowed; NULL for plain numbers */
    const struct gm_modelfile *files; /* borrowed weight-file headers, or NULL */
    uint64_t n_params;                /* overrides the model's count; needed without one */
    uint64_t largest_layer_params;    /* DeepSpeed ZeRO-3 largest layer; 0 = from the model */
    const char *origin;               /* borrowed: how the model was found (an assumption of
                                         the estimate), or NULL */
    const char *ref;                  /* borrowed: what an engine loads the model by (a Hub
                                         id, "org/name@revision", a path), or NULL */
};

/* How much work one step does. */
struct gm_job_workload {
    uint64_t batch;      /* micro-batch (training) or concurrent sequences (inference) */
    uint64_t seq;        /* training sequence length, tokens (an encoder-decoder's source) */
    uint64_t target_seq; /* training an encoder-decoder: target tokens; 0 = seq */
    uint64_t context;    /* inference: prompt tokens per sequence */
    uint64_t new_tokens; /* inference: generated tokens per sequence */
    uint64_t grad_accum; /* training: micro-batches per optimizer step */
    bool full_logits;    /* inference: prefill computes logits for every position */
    bool static_cache;   /* inference: generate(cache_implementation="static"): the cache
                            preallocated, never concatenated */
    /* memory techniques: packing / padding-free batches */
    uint64_t tokens; /* training: tokens in one micro-batch (packed or padding-free);
                        0 = batch x seq.  seq stays the longest sequence */
    /* vision-language models: images per sequence and their size in pixels (0 = the
       processor's own: CLIP's fixed side, else 1024 x 1024); their tokens join the context
       (inference) or the sequence (training) */
    uint64_t images;
    uint64_t image_width;
    uint64_t image_height;
    uint64_t image_tokens; /* set when the job is resolved: the images' tokens included in
                              context or seq (0 before, or without images) */
};

/* Number formats and the optimizer. */
/* Which kernel runs a GPTQ or AWQ checkpoint's linears in HF generate(): their scratch
 * buffers differ (docs/estimate.md, "Quantised kernels"). */
enum gm_quant_kernel {
    GM_QKERNEL_AUTO = 0,  /* as transformers picks: GPTQ 4-bit exllama, AWQ gemm */
    GM_QKERNEL_EXLLAMA,   /* GPTQ exllama (v1): temp_dq and, with act-order, temp_state */
    GM_QKERNEL_EXLLAMAV2, /* GPTQ exllamav2: one scratch per device for the largest linear */
    GM_QKERNEL_MARLIN,    /* GPTQ Marlin: a small workspace per linear */
    GM_QKERNEL_GEMM,      /* AutoAWQ WQLinear_GEMM: dequantises the weight for long inputs */
    GM_QKERNEL_PLAIN,     /* a kernel without scratch (auto-gptq cuda / triton, AWQ gemv) */
    GM_QKERNEL__COUNT
};

struct gm_job_numerics {
    enum gm_precision precision; /* training */
    enum gm_weight_format weight_format;
    double weight_bits;     /* GM_WEIGHTS_BITS: bits per weight (16, 8, 4.5, ...) */
    enum gm_dtype kv_dtype; /* KV cache element type; UNKNOWN = the engine's default */
    enum gm_optimizer optimizer;
    enum gm_optim_impl optim_impl;
    enum gm_zero_grad zero_grad;
    double activations_per_token; /* --method blog: A (elements per token); 0 = the fit */
    /* ---- weight formats (bitsandbytes, GPTQ, AWQ, FP8) ---- */
    struct gm_quant quant; /* GM_WEIGHTS_QUANT: the format (--quant, --quant-bits, --group-size) */
    enum gm_quant_kernel quant_kernel; /* inference: GPTQ / AWQ kernel (default as transformers) */
};

struct gm_job_lora {
    uint64_t rank;     /* r, default 16 */
    unsigned targets;  /* enum gm_lora_target flags, default GM_LORA_ATTENTION */
    double dropout;    /* PEFT lora_dropout; > 0 keeps a dropped-out input copy */
    bool double_quant; /* QLoRA: quantise the quantisation constants too (default true) */
    uint64_t block;    /* QLoRA: NF4 block size, 64 */
    bool fp32_upcast;  /* QLoRA: PEFT prepare_model_for_kbit_training upcasts the
                          parameters that are not NF4 to fp32 (default true) */
};

/* Techniques that trade compute or quality for memory. */
struct gm_job_memory {
    enum gm_ckpt checkpointing;
    enum gm_attention attention;
    enum gm_adapter adapter;
    struct gm_job_lora lora;
    bool paged_optimizer; /* bitsandbytes paged optimizer (state may page to host) */
    /* memory techniques of modern training stacks */
    enum gm_loss loss;
    uint64_t loss_chunks;        /* GM_LOSS_CHUNKED, _BACKWARD: chunks (torchtune's and
                                    torchtitan's default 8) */
    enum gm_loss_impl loss_impl; /* GM_LOSS_FUSED_LINEAR, GM_LOSS_FUSED: the kernel (default
                                    Liger; GM_LOSS_FUSED takes Liger or unsloth) */
    uint64_t checkpoint_every;   /* GM_CKPT_FULL on every N-th layer only (torchtitan layer
                                    SAC); 1 = every layer */
    bool optimizer_in_backward;  /* step and free each gradient as it is ready (torchtune) */
    bool activation_offload;     /* saved activations to pinned host memory (torchtune) */
    unsigned fused_kernels;      /* enum gm_fused flags */
    bool compile;                /* torch.compile: the min-cut partitioner decides what is
                                    saved (modelled approximately) */
    bool float8;                 /* torchao Float8Linear training (tensorwise dynamic scaling):
                                    the linears cast their operands to fp8 per matmul */
    enum gm_dtype adapter_dtype; /* LoRA adapters: UNKNOWN = fp32 (PEFT autocast_adapter_dtype)
                                    unless --precision bf16 */
    bool loss_cache_block;       /* GM_LOSS_FUSED with GM_LOSS_IMPL_UNSLOTH over materialised
                                    logits: the step replay keeps one fp32 logits-sized block
                                    more in the cache, as measured on fms-acceleration's FOAK
                                    runs, not read in code (default true; docs/estimate.md) */
};

/* Where the job runs. */
struct gm_job_parallel {
    uint64_t gpus;          /* total GPUs; 0 = tp x pp */
    uint64_t gpus_per_node; /* 0 = min(gpus, 8) */
    enum gm_shard shard;
    bool offload_optimizer;          /* optimizer state + fp32 master weights on the CPU */
    bool offload_params;             /* ZeRO-3 / FSDP parameters on the CPU */
    uint64_t tp;                     /* tensor-parallel degree, 1 */
    uint64_t pp;                     /* pipeline ranks (training), 1 */
    enum gm_pp_schedule pp_schedule; /* training with pp > 1: the schedule, GM_PP_1F1B */
    uint64_t pp_stages_per_rank;     /* GM_PP_INTERLEAVED_1F1B: stages per rank, 2 */
    uint64_t pp_microbatches;        /* training with pp > 1: micro-batches per step through
                                        the pipeline; 0 = workload.grad_accum when above 1,
                                        else pp (torchtitan's default) */
    uint64_t cp;                     /* context-parallel degree (training: each rank holds seq / cp
                                        tokens, ring attention), 1 */
    bool sequence_parallel;          /* Megatron sequence parallelism (with tp > 1) */
    bool async_tp;                   /* torchtitan enable_async_tensor_parallel: Inductor's
                                        micro-pipelined TP over a SymmetricMemory workspace */
    uint64_t bucket_elements;        /* ZeRO reduce bucket, elements (5e8 DeepSpeed) */
    bool zero_overlap_comm;          /* ZeRO-1/2 overlap_comm: the reduce bucket double-buffered */
    bool ddp_bucket_view;            /* DDP gradient_as_bucket_view=True (no bucket copy) */
    /* ZeRO-3 stage3_max_reuse_distance, elements (1e9 DeepSpeed) */
    uint64_t zero_reuse_distance;
    /* memory techniques: FSDP version, resharding, expert parallelism */
    unsigned fsdp_version;      /* 1 FullyShardedDataParallel (flat parameters), 2 fully_shard */
    bool reshard_after_forward; /* FSDP: free the gathered layer after forward (default true;
                                   false: FSDP2 reshard_after_forward=False, FSDP1
                                   SHARD_GRAD_OP) */
    bool shard_ends;            /* FSDP: the embedding and the lm_head (with the final norm)
                                   units of their own (torchtune custom_sharded_layers,
                                   torchtitan), gathered for their own forward and backward
                                   only, not in the root from forward to backward */
    bool sync_module_states;    /* FSDP1 under the HF Trainer: each unit broadcast from rank 0
                                   as it is wrapped (default true, accelerate launch's
                                   fsdp_sync_module_states) */
    uint64_t ep;                /* expert-parallel degree for MoE layers, 1 */
    uint64_t replicas;          /* inference: copies of the model over the GPUs; 0 = gpus /
                                   (tp x pp), or with a sharding engine (vLLM, SGLang) one
                                   copy, --gpus then meaning tensor parallelism */
};

struct gm_job_vllm {
    double gpu_memory_utilization;   /* 0.9 */
    uint64_t max_model_len;          /* 0: the model's max positions (or the request) */
    uint64_t block_size;             /* KV block, tokens (16) */
    uint64_t max_num_seqs;           /* 256 */
    uint64_t max_num_batched_tokens; /* profile run, 0: 8192 */
    bool enforce_eager;              /* no CUDA graphs */
    bool flashinfer_sampler;         /* V1's top-k/top-p through FlashInfer (the log's "Using
                                        FlashInfer for top-p & top-k sampling") */
    uint64_t cuda_graph_bytes;       /* CUDA-graph memory; 0: modelled by version */
    uint64_t non_torch_bytes;        /* non-torch memory; 0: default by TP */
    uint64_t kv_cache_memory_bytes;  /* the KV pool given outright (--kv-cache-memory-bytes,
                                        vLLM 0.11+): no budget from gpu_memory_utilization */
};

struct gm_job_llamacpp {
    uint64_t n_ubatch;     /* physical batch, 512 */
    bool flash_attn;       /* -fa: no materialised KQ */
    uint64_t n_gpu_layers; /* -ngl: layers on the GPU (the output layer counts as one more);
                              999 = all */
    uint64_t n_cpu_moe;    /* --n-cpu-moe: routed experts of the first N layers in host
                              memory */
    bool ngl_output_last;  /* -ngl counts the repeating layers first and the output layer
                              last (llama.cpp before PR #18148, ollama's runner) */
    bool kv_cpy;           /* the KV cache written by ggml_cpy into views, no row-index inputs
                              (builds before PR #14959, August 2025, or up to PR #15505 with
                              LLAMA_SET_ROWS=0) */
};

struct gm_job_sglang {
    double mem_fraction_static;    /* weights + KV pool share; 0: SGLang's default for the GPU */
    uint64_t context_length;       /* 0: the model's max positions */
    uint64_t max_running_requests; /* 0: not capped by the job */
    uint64_t chunked_prefill_size; /* 0: SGLang's default for the GPU */
};

/* The serving engine and its settings. */
struct gm_job_engine {
    enum gm_engine kind;
    struct gm_job_vllm vllm;
    struct gm_job_llamacpp llamacpp;
    struct gm_job_sglang sglang;
};

/* What lives outside the tensors (defaults documented in docs/estimate.md). */
struct gm_job_runtime {
    uint64_t cuda_context_bytes; /* CUDA context + loaded kernels, outside the allocator */
    uint64_t workspace_bytes;    /* library memory outside the allocator (0) */
    double fragmentation;        /* reserved/allocated excess on transient memory (0.25) */
    struct gm_alloc_conf alloc;  /* PYTORCH_CUDA_ALLOC_CONF the step replay runs with */
    uint64_t reserve_bytes;      /* weights mode: flat reserve for everything else */
    /* runtime around the tensors */
    uint64_t nccl_bytes; /* NCCL buffers per communicator (1 GiB) */
    bool no_p2p;         /* GPUs without peer access: NCCL's buffers in host memory */
};

/* The software the job runs on, where memory depends on the version.  Versions are packed
 * by GM_VERSION(major, minor, patch); 0 = the current release (as docs/estimate.md says). */
#define GM_VERSION(a, b, c) (((uint32_t)(a) << 16) | ((uint32_t)(b) << 8) | (uint32_t)(c))

/* The training stack: what the suggestions may name (op-level checkpointing is
 * torchtitan's, optimizer-in-backward torchtune's, ZeRO DeepSpeed's under the HF stack). */
enum gm_framework {
    GM_FRAMEWORK_HF = 0,     /* transformers Trainer / accelerate / TRL, DeepSpeed, PEFT, Liger */
    GM_FRAMEWORK_TORCHTUNE,  /* torchtune recipes (FSDP2, chunked loss, offloading) */
    GM_FRAMEWORK_TORCHTITAN, /* torchtitan (FSDP2, selective and op-level checkpointing) */
    GM_FRAMEWORK_MEGATRON,   /* Megatron-LM (distributed optimizer, selective recompute) */
    GM_FRAMEWORK_LIGHTNING,  /* Lightning Fabric / LitGPT */
    GM_FRAMEWORK__COUNT
};

/* A stack preset (--stack NAME[@VERSION]): the defaults that stack's own code uses, from
 * the table in src/estimate/stacks.c; GM_STACK_NONE sets nothing. */
enum gm_stack_preset {
    GM_STACK_NONE = 0,
    GM_STACK_HF,         /* "hf": the HF family for suggestions, no defaults */
    GM_STACK_HF_TRAINER, /* transformers Trainer */
    GM_STACK_ACCELERATE, /* a custom loop under accelerate */
    GM_STACK_AXOLOTL,
    GM_STACK_UNSLOTH,
    GM_STACK_TORCHTUNE,
    GM_STACK_TORCHTITAN,
    GM_STACK_LIGHTNING, /* LitGPT's finetune/full.py on Lightning Fabric */
    GM_STACK_MEGATRON,  /* "megatron": the family for suggestions, no defaults */
    GM_STACK__COUNT
};

/* Whose code of the architecture runs (where implementations save different tensors). */
enum gm_model_impl {
    GM_MODEL_IMPL_HF = 0, /* transformers' modeling_*.py */
    GM_MODEL_IMPL_LITGPT, /* LitGPT's litgpt/model.py: GELU as one F.gelu op */
    GM_MODEL_IMPL__COUNT
};

struct gm_job_stack {
    enum gm_framework framework;   /* training stack (default the HF stack) */
    enum gm_model_impl model_impl; /* whose model code (default transformers') */
    enum gm_stack_preset preset;   /* --stack: whose defaults the job took */
    uint32_t preset_version;       /* --stack NAME@VERSION; 0 = its newest row */
    uint32_t cuda;                 /* CUDA runtime: before 11.7 no lazy module loading */
    uint32_t transformers;         /* HF transformers: how ForCausalLMLoss copies the logits */
    uint32_t vllm;                 /* vLLM: how determine_available_memory budgets the KV cache */
    uint32_t bitsandbytes;         /* before 0.43.2 the 4-bit matmul keeps its input; before 0.44
                                      the 8-bit optimizers quantise in blocks of 2048, not 256 */
    uint32_t torch;                /* PyTorch: before 2.0 a for-loop optimizer step and
                                      zero_grad() to zeros by default */
    uint32_t trl;                  /* TRL: from 0.7.5 SFTTrainer casts a bf16 QLoRA model's
                                      embeddings and lm_head back to bf16 after PEFT's upcast */
};

/* How the GPUs of one board's servers reach each other: it sets how many channels NCCL opens
 * (stage_runtime.c, est_nccl_comm_bytes). */
enum gm_gpu_link {
    GM_GPU_LINK_PCIE = 0, /* PCIe only (the default, and for a GPU known by its size alone) */
    GM_GPU_LINK_NVLINK,   /* NVLink through NVSwitch on the board's usual servers (HGX/DGX) */
};

/* The GPU the fit is judged on. */
struct gm_job_gpu {
    uint64_t memory_bytes;  /* capacity of each device; 0 = none (list what fits) */
    uint64_t cuda_bytes;    /* the total CUDA reports (cudaMemGetInfo) where the catalog knows
                               it; 0 = memory_bytes */
    char label[48];         /* catalog name or the size as given, for messages */
    unsigned sm;            /* compute capability x 10 of a catalog GPU; 0 = unknown */
    bool no_p2p;            /* a catalog GPU without peer access (gm_gpu.no_p2p) */
    unsigned sms;           /* streaming multiprocessors of a catalog GPU; 0 = unknown */
    enum gm_gpu_link link;  /* a catalog GPU's link to its peers (gm_gpu.link); else PCIe */
    uint64_t catalog_bytes; /* a catalog GPU whose total was given (--gpu NAME --gpu-memory SIZE,
                               in either order): the catalog's own total, which memory_bytes
                               replaces; 0 = the total is the catalog's or there is no GPU */
};

#define GM_JOB_MAX_SETTINGS 128

struct gm_job {
    enum gm_est_mode mode;
    enum gm_method method;
    struct gm_job_model model;
    struct gm_job_workload workload;
    struct gm_job_numerics numerics;
    struct gm_job_memory memory;
    struct gm_job_parallel parallel;
    struct gm_job_engine engine;
    struct gm_job_runtime runtime;
    struct gm_job_gpu gpu;
    struct gm_job_stack stack; /* software versions (runtime around the tensors) */
    const char *from;          /* borrowed: what an engine command line read into the job gave
                                  and left (gm_job_read_command()), an assumption, or NULL */
    enum gm_search search;     /* what gm_estimate_report_run() searches, if anything */
    uint64_t search_limit;     /* upper bound of a search (1 << 20) */
    /* private: which settings gm_job_set() was given (index in gm_job_settings()) */
    uint64_t given[GM_JOB_MAX_SETTINGS / 64];
    /* private: which settings the --stack preset set (and nothing given after) */
    uint64_t preset[GM_JOB_MAX_SETTINGS / 64];
};

/* Every documented default: weights mode, arch method, bf16-mixed, adamw, foreach, no
 * checkpointing, sdpa, set_to_none, batch 1, seq 2048, context 2048, no new tokens, one
 * GPU, no engine, CUDA context 450 MiB, workspaces 64 MiB, fragmentation 0.25, no GPU. */
void gm_job_init(struct gm_job *job);

/* ---- job settings by name: what the CLI's options and a binding's keywords set ---- */

enum gm_job_setting_type {
    GM_JOB_FLAG = 0, /* no value (a binding passes NULL, "", "true"/"1" or "false"/"0") */
    GM_JOB_U64,      /* whole number */
    GM_JOB_COUNT,    /* whole number, also 1.5e9, 8B, 500M, 1.2T */
    GM_JOB_SIZE,     /* bytes: "24GiB", "80GB", bare bytes */
    GM_JOB_DOUBLE,
    GM_JOB_CHOICE, /* one of 'choices' */
    GM_JOB_TEXT    /* free text, parsed by the setting (GPU names, LoRA targets) */
};

/* Modes a setting applies to (flags of 1 << enum gm_est_mode). */
#define GM_APPLIES_WEIGHTS (1u << GM_EST_WEIGHTS)
#define GM_APPLIES_TRAIN   (1u << GM_EST_TRAIN)
#define GM_APPLIES_INFER   (1u << GM_EST_INFER)
#define GM_APPLIES_ANY     (GM_APPLIES_WEIGHTS | GM_APPLIES_TRAIN | GM_APPLIES_INFER)

/* A value parsed by its setting's type. */
union gm_job_value {
    bool flag;
    uint64_t u64; /* U64, COUNT, SIZE */
    double number;
    int choice; /* the enum value */
    const char *text;
};

struct gm_job_setting {
    const char *name; /* "batch": the CLI's --batch, a binding's batch= */
    enum gm_job_setting_type type;
    const char *argname;        /* "N", "SIZE"; NULL for flags and choices */
    const char *help;           /* one line */
    const char *const *choices; /* GM_JOB_CHOICE: NULL-terminated names */
    unsigned modes;             /* GM_APPLIES_* where it applies */
    enum gm_engine engine;      /* the engine it belongs to, or GM_ENGINE_NONE */
    /* private: how the value reaches struct gm_job (see job.c) */
    size_t offset;     /* of the field the value is stored in; SIZE_MAX: 'set' stores it.
                          The numeric fields are held to lo..hi by gm_job_check() too */
    double lo, hi;     /* accepted range of numbers */
    unsigned open;     /* 1: lo excluded, 2: hi excluded */
    const int *values; /* CHOICE: the enum value of each choice, NULL = its index */
    /* after the field is stored: what else the setting decides (or the whole value) */
    enum gm_status (*set)(struct gm_job *job, const union gm_job_value *v, struct gm_error *err);
    bool clears; /* FLAG: given, it stores false in its field (a "--no-..." setting) */
};

/* The settings in --help order; static storage.  *n receives the count. */
const struct gm_job_setting *gm_job_settings(size_t *n);
/* The setting called 'name' (dashes or underscores), or NULL. */
const struct gm_job_setting *gm_job_setting_find(const char *name);

/* Set one setting from its text value, checking the value itself (range, choice, GPU
 * name); remembers that it was given.  GM_ERR_INVALID naming the setting ("--batch: ..."),
 * or for an unknown setting.  A flag takes NULL, "", "true" or "1" (and "false" or "0",
 * which leaves it unset). */
enum gm_status gm_job_set(struct gm_job *job, const char *name, const char *value,
                          struct gm_error *err);
/* Whether gm_job_set() was given this setting (by name, for bindings and tools; inside the
 * library settings are addressed by id). */
bool gm_job_given(const struct gm_job *job, const char *name);

/* The checks across settings, once for everyone: settings that do not apply to the mode
 * or engine, options that exclude each other, counts that do not divide, ...  The
 * pipeline runs them too.  GM_ERR_INVALID with a message naming the setting. */
enum gm_status gm_job_check(const struct gm_job *job, struct gm_error *err);

/* ---- MODEL as the user names it ---- */

/* What MODEL names, loaded: a config.json (or a folder holding one), weight files
 * (safetensors file / shards / index, GGUF) read from their headers, a Hugging Face id in
 * the local hub cache, or a built-in name (src/estimate/source.c gives the order). */
struct gm_job_source {
    struct gm_model model;
    struct gm_modelfile files;
    bool has_files;
    char origin[GM_EST_NOTE_MAX]; /* how MODEL was found when that is worth saying, else "" */
    char ref[512];                /* what an engine loads it by: the Hub id, a path */
};

/* Load 'spec' into 'src' (which owns what it loads: release it with
 * gm_job_source_release()), looking for a Hugging Face id in 'hub_cache' (the folder
 * gm_hf_hub_cache() finds; NULL: no cache).  The model is named after its file or folder
 * when the files do not name it.  GM_ERR_NOENT for a name found nowhere (the message says
 * where it looked, how to fetch the config and what the name is likely a slip for); the
 * errors of gm_model_load_hf_config() and gm_modelfile_load(). */
enum gm_status gm_job_source_load(struct gm_job_source *src, const char *spec,
                                  const char *hub_cache, struct gm_error *err);
void gm_job_source_release(struct gm_job_source *src);
/* Point job->model at what 'src' holds (borrowed: keep 'src' alive). */
void gm_job_use_source(struct gm_job *job, const struct gm_job_source *src);

/* ---- an engine's own command line, both ways (src/estimate/command.c) ---- */

struct gm_estimate;

/* Read a serving command as users run it ("vllm serve MODEL ...", "python -m
 * sglang.launch_server --model-path MODEL ...", "llama-server -m MODEL ..."): the job
 * becomes inference with that engine and the settings its flags name (set by name through
 * gm_job_set(), so they are checked as typed); the model it serves goes to model[n_model]
 * ("org/name@revision" with --revision), the words no setting reads to note[n_note].
 * GM_ERR_INVALID for a command gpumem does not read, a flag's bad value, no model. */
enum gm_status gm_job_read_command(struct gm_job *job, const char *command, char *model,
                                   size_t n_model, char *note, size_t n_note, struct gm_error *err);
/* The command line of the job's engine (vLLM, SGLang, llama.cpp) that serves it as 'e'
 * (its estimate) sizes it, into out[n] ("" for a job without such an engine); read back
 * by gm_job_read_command(), it gives the same job. */
enum gm_status gm_estimate_plan(const struct gm_job *job, const struct gm_estimate *e, char *out,
                                size_t n, struct gm_error *err);

/* ---- the estimate ---- */

/* Phases of a step; a component is live during a set of them (flags). */
enum gm_est_phase {
    GM_EST_PHASE_FORWARD_BACKWARD = 1 << 0,
    GM_EST_PHASE_OPTIMIZER_STEP = 1 << 1,
    GM_EST_PHASE_PREFILL = 1 << 2,
    GM_EST_PHASE_DECODE = 1 << 3,
    /* The end of the backward pass: every gradient allocated, activations released.  The
     * forward/backward peak is the larger of its start and its end. */
    GM_EST_PHASE_BACKWARD_END = 1 << 4,
    /* The loss: the end of the forward pass and the loss's own backward, before the layers'
     * backward (the logits live here, not beside the layers' backward temporaries). */
    GM_EST_PHASE_LOSS = 1 << 5
};
#define GM_EST_PHASE_TRAIN_ALL                                                                     \
    (GM_EST_PHASE_FORWARD_BACKWARD | GM_EST_PHASE_BACKWARD_END | GM_EST_PHASE_OPTIMIZER_STEP |     \
     GM_EST_PHASE_LOSS)
/* Saved for backward: from the forward pass through the loss to the start of backward. */
#define GM_EST_PHASE_SAVED     (GM_EST_PHASE_FORWARD_BACKWARD | GM_EST_PHASE_LOSS)
#define GM_EST_PHASE_INFER_ALL (GM_EST_PHASE_PREFILL | GM_EST_PHASE_DECODE)
#define GM_PHASE_ALL           (GM_EST_PHASE_TRAIN_ALL | GM_EST_PHASE_INFER_ALL)

/* What a component is.  Stages decide by kind, never by name. */
enum gm_est_kind {
    GM_KIND_WEIGHTS = 0,     /* weights the model computes with (a frozen base too) */
    GM_KIND_MASTER_WEIGHTS,  /* fp32 master copy of mixed precision */
    GM_KIND_ADAPTERS,        /* trainable adapter weights (LoRA) */
    GM_KIND_WEIGHT_COPIES,   /* 16-bit autocast copies of the weights kept for backward */
    GM_KIND_GATHERED,        /* one layer materialised for a moment: ZeRO-3/FSDP gathered
                               parameters or unsharded gradient, a dequantised NF4 layer */
    GM_KIND_GRADIENTS,       /* parameter gradients */
    GM_KIND_OPTIMIZER_STATE, /* moments, momentum, factored statistics */
    GM_KIND_OPTIMIZER_TEMP,  /* temporaries of the optimizer step */
    GM_KIND_ACTIVATIONS,     /* saved for backward (training) or transient (inference) */
    GM_KIND_LOGITS,          /* logits and the loss over them */
    GM_KIND_BACKWARD_TEMP,   /* gradients of activations during backward */
    GM_KIND_KV_CACHE,        /* attention keys and values kept for generation */
    GM_KIND_COMM_BUFFERS,    /* DDP gradient buckets, ZeRO reduce/all-gather buckets */
    GM_KIND_ENGINE_POOL,     /* an engine's own buffers: CUDA-graph pool, ggml compute */
    GM_KIND_TORCH_WORKSPACE, /* the cuBLAS workspace PyTorch takes from its caching allocator
                                for a handle and stream, kept for the process */
    /* Runtime overheads: outside the caching allocator, on the device figure only. */
    GM_KIND_CUDA_CONTEXT, /* CUDA context and loaded kernels */
    GM_KIND_WORKSPACE,    /* cuBLAS / cuDNN workspaces and handles (--workspace) */
    GM_KIND_NCCL,         /* NCCL communicator buffers */
    GM_KIND_NON_TORCH,    /* vLLM's measured non-torch memory (NCCL, cuBLAS, ...) */
    GM_KIND_RESERVE,      /* weights mode: the flat reserve for everything else */
    /* memory techniques: outside the caching allocator too */
    GM_KIND_MANAGED,  /* cudaMallocManaged memory (bitsandbytes paged optimizer state): on the
                         device, not in max_memory_allocated */
    GM_KIND_SYMM_MEM, /* SymmetricMemory workspace (AsyncTP), mapped with the driver API: on
                         the device, not in max_memory_reserved */
    GM_KIND__COUNT
};

/* How a component scales with the decoder layers a device holds (pipeline stages). */
enum gm_est_extent {
    GM_EXTENT_ALL_LAYERS = 0, /* proportional to the layers (or parameters) held */
    GM_EXTENT_ONE_LAYER,      /* the size of one layer or one bucket, however many are held */
    GM_EXTENT_ENDS,           /* input and output side: the first and the last stage */
    GM_EXTENT_HEAD            /* output side only: the last stage */
};

/* The CUDA stream that allocates a component's tensors: the caching allocator never hands a
 * block freed on one stream to a request on another (docs/alloc.md), so memory cached by
 * FSDP's all-gather and reduce-scatter streams is not reused by the compute stream. */
enum gm_est_stream {
    GM_EST_STREAM_COMPUTE = 0, /* the default stream: the model's forward, backward, step */
    GM_EST_STREAM_UNSHARD,     /* FSDP / ZeRO-3 all-gather of parameters */
    GM_EST_STREAM_REDUCE,      /* FSDP's reduce-scatter: the sharded gradients it allocates */
    GM_EST_STREAM__COUNT
};

/* Hard caps on the growing lists of one estimate (far above any job): a component past the
 * cap is GM_ERR_LIMIT, an assumption past it is dropped. */
#define GM_EST_MAX_COMPONENTS  1024
#define GM_EST_MAX_ASSUMPTIONS 256
#define GM_EST_MAX_GROUPS      4

struct gm_est_component {
    enum gm_est_kind kind;
    char name[GM_EST_NAME_MAX]; /* display name ("weights_fp32_master"); never decides */
    uint64_t bytes;             /* on one device */
    unsigned phases;            /* enum gm_est_phase flags */
    bool transient;             /* freed within the phase (counted as dynamic memory) */
    enum gm_est_extent extent;
    /* The share of 'bytes' (0..1) that grows with batch x seq^2: eager attention's s x s
     * scores.  The rest grows with the tokens or not at all.  A share, not bytes, so that
     * stages rescaling 'bytes' (pipeline stages, tensor parallelism: approximately without
     * sequence parallelism, which splits the scores more than the rest) keep it. */
    double seq2_share;
    /* The share of 'bytes' (0..1) that are gradients of activations at the component's
     * moment (the loss's backward): a snapshot counts them as 'other' (born and freed in
     * backward), the rest as the kind's category (gm_est_kind_category()). */
    double act_grad_share;
    enum gm_est_stream stream; /* the stream its tensors are allocated on */
    /* Held by a local of the model's forward alone, which computes the loss and returns
     * without it: freed when the forward returns, before the loss's backward (a component of
     * the loss's moment). */
    bool forward_local;
    /* The equal tensors 'bytes' is made of, each allocated on its own (0 or 1: one tensor);
     * the step replay requests each. */
    unsigned tensors;
    char note[GM_EST_NOTE_MAX]; /* how it was computed, human-readable */
};

/* Devices that get the same figures ("ranks 0-7", or one pipeline stage). */
struct gm_device_group {
    char role[24]; /* "all", "first stage", "middle stages", "last stage" */
    uint64_t first_rank;
    uint64_t count;
    uint64_t layers; /* decoder layers held (pipeline), 0 = all */
    uint64_t allocated_bytes;
    uint64_t reserved_bytes;
    uint64_t device_bytes;
};

/* The parallel layout as resolved. */
struct gm_est_layout {
    uint64_t gpus;
    uint64_t gpus_per_node;
    uint64_t nodes;
    uint64_t dp;                  /* data-parallel ranks: gpus / (tp x pp) */
    uint64_t host_bytes_per_node; /* offloaded state held by one node's host memory */
    uint64_t nccl_communicators;  /* NCCL communicators one rank holds (stage_runtime.c) */
    size_t n_groups;
    struct gm_device_group groups[GM_EST_MAX_GROUPS];
};

struct gm_est_lora {
    uint64_t trainable_params;
    uint64_t frozen_params;
    uint64_t base_weight_bytes;  /* frozen base weights on one device, before sharding */
    uint64_t nf4_constant_bytes; /* QLoRA quantisation constants */
};

/* Where a serving engine's longest request (vLLM's max_model_len, SGLang's context_length)
 * came from. */
enum gm_max_len_from {
    GM_MAX_LEN_REQUEST = 0, /* the request's own length: the model gives no positions */
    GM_MAX_LEN_GIVEN,       /* the engine's setting (--max-model-len, --context-length) */
    GM_MAX_LEN_POSITIONS,   /* the model's max_position_embeddings */
    GM_MAX_LEN_ROPE,        /* vLLM: max_position_embeddings stretched by rope_scaling */
};

struct gm_est_serving {
    uint64_t budget_bytes;           /* vLLM: total x gpu_memory_utilization */
    uint64_t total_bytes;            /* vLLM: the total CUDA reports, which the budget takes */
    uint64_t non_torch_bytes;        /* vLLM: non-torch memory beside the context and NCCL */
    uint64_t non_torch_logged_bytes; /* vLLM: what its log prints as non-torch, by version */
    uint64_t activation_peak_bytes;
    /* vLLM 0.21 on: its own estimate of the CUDA graphs, charged to the budget (the device
     * holds the 'cuda_graphs' component instead); 0 where the budget pays none */
    uint64_t cuda_graph_charged_bytes;
    uint64_t kv_bytes_per_token; /* all layers, one device */
    uint64_t kv_pool_bytes;
    uint64_t kv_blocks;
    uint64_t kv_tokens;
    uint64_t kv_tokens_logged; /* vLLM: what its log prints as "GPU KV cache size", by version */
    uint64_t block_size;
    uint64_t max_model_len;
    enum gm_max_len_from max_model_len_from; /* where max_model_len came from */
    uint64_t max_num_seqs;           /* vLLM: as the version defaults it for the GPU, or given */
    uint64_t max_num_batched_tokens; /* vLLM: the profile run's tokens, likewise */
    uint64_t sampler_bytes;          /* vLLM: the profile run's sampler peak */
    /* vLLM 0.2.7 to 0.7 at tp > 1: what a worker that does not sample (every rank but the
     * driver) profiles and prints; 0 where every rank samples */
    uint64_t worker_activation_peak_bytes;
    uint64_t worker_kv_available_bytes; /* its budget less weights, its peak and non-torch */
    double max_concurrency;             /* kv_tokens / max_model_len */
    uint64_t compute_buffer_bytes;      /* llama.cpp */
    uint64_t n_ctx;                     /* llama.cpp cells */
    double static_fraction;             /* SGLang: mem_fraction_static as used */
};

enum gm_fit_reason {
    GM_FIT_NOT_JUDGED = 0,     /* no GPU given */
    GM_FIT_FITS,               /* every device within its memory; the engine starts */
    GM_FIT_FITS_PAGED,         /* fits once part of the paged optimizer state is in host memory */
    GM_FIT_DEVICE_OVER,        /* a device's predicted use exceeds its memory */
    GM_FIT_ENGINE_NO_START,    /* vLLM: the KV pool holds less than one max_model_len sequence */
    GM_FIT_ENGINE_CONCURRENCY, /* vLLM: fewer than the requested concurrent sequences */
    GM_FIT_CONTEXT_OVER,       /* llama.cpp: the weights fit, the KV cache for n_ctx does not */
    GM_FIT__COUNT
};

/* The verdict over the range of the figures (the point estimate decides 'fits'). */
enum gm_fit_verdict {
    GM_VERDICT_NOT_JUDGED = 0, /* no GPU given */
    GM_VERDICT_FITS,           /* even the high end of the range fits */
    GM_VERDICT_BORDERLINE,     /* the range straddles the capacity (or the engine's limit) */
    GM_VERDICT_DOES_NOT_FIT,   /* not even the low end fits */
    GM_VERDICT__COUNT
};

/* The one fit verdict. */
struct gm_est_fit {
    enum gm_fit_reason reason;
    bool fits;
    uint64_t capacity_bytes;
    uint64_t device_bytes;    /* the largest device figure */
    int64_t headroom_bytes;   /* capacity - device_bytes (negative: short) */
    uint64_t shortfall_bytes; /* how far from fitting, in bytes; 0 when it fits */
    uint64_t paged_bytes;     /* GM_FIT_FITS_PAGED: state that would live in host memory */
    bool group_fits[GM_EST_MAX_GROUPS];
    char text[200]; /* the reason as a sentence */
    /* ranges: the verdict over the low and high ends of the figures */
    enum gm_fit_verdict verdict;
    int64_t headroom_low_bytes;  /* headroom at the high end of the range (the worst case) */
    int64_t headroom_high_bytes; /* headroom at the low end of the range (the best case) */
    char range_text[120];        /* the margin over the range as a phrase */
};

/* The assumptions that are uncertain, each spreading the figures into a range. */
enum gm_est_uncertainty {
    GM_UNCERTAIN_FRAGMENTATION = 1 << 0, /* the caching allocator's cached, unused blocks */
    GM_UNCERTAIN_CUDA_CONTEXT = 1 << 1,  /* CUDA context and loaded kernels */
    GM_UNCERTAIN_NCCL = 1 << 2,          /* NCCL buffers per communicator */
    GM_UNCERTAIN_ENGINE = 1 << 3,        /* engine defaults: vLLM non-torch memory and CUDA
                                            graphs, llama.cpp's compute buffer */
    /* 1 << 4 is unused (an unstated sequence length is a named assumption, not a range) */
    GM_UNCERTAIN_APPROX = 1 << 5,        /* approximate models: torch.compile, activation
                                            offloading in flight, expert routing imbalance,
                                            cuBLAS workspaces in the allocator */
    GM_UNCERTAIN_STREAM_TIMING = 1 << 6, /* how far the GPU lags the CPU: FSDP1's gathered
                                            blocks freed but still in use on the compute
                                            stream */
    GM_UNCERTAIN__ALL = (1 << 7) - 1
};

/* Low and high ends of the three figures (the largest device), from the uncertain
 * assumptions at their low and high values; the point estimate lies between them. */
struct gm_est_range {
    uint64_t allocated_bytes[2]; /* [0] low, [1] high */
    uint64_t reserved_bytes[2];
    uint64_t device_bytes[2];
    unsigned sources; /* enum gm_est_uncertainty flags that spread the range */
};

/* Where the CUDA context's figure comes from (gm_est_context_source_name()). */
enum gm_est_context_source {
    GM_EST_CONTEXT_DEFAULT = 0,   /* --cuda-context's default: a context with the kernels a
                                     PyTorch job loads (450 MiB) */
    GM_EST_CONTEXT_GIVEN,         /* --cuda-context as given */
    GM_EST_CONTEXT_DRIVER_BY_SMS, /* vLLM on a catalog GPU: the driver's own context, from the
                                     GPU's SMs and the most threads an SM keeps resident */
    GM_EST_CONTEXT_EAGER,         /* CUDA before 11.7: every kernel loads at start-up */
    GM_EST_CONTEXT_IN_RESERVE,    /* weights only with --reserve-gib: inside the reserve (0) */
    GM_EST_CONTEXT__COUNT
};

/* The CUDA context one device holds, as the estimate used it (the point estimate). */
struct gm_est_context {
    uint64_t bytes; /* the context the figures and the engine's budget count */
    enum gm_est_context_source source;
    unsigned sms;            /* the GPU's SMs where the figure follows them, else 0 */
    unsigned threads_per_sm; /* the most threads an SM keeps resident, where used, else 0 */
    bool extrapolated;       /* driver_by_sms on an SM of 2048 threads: the per-thread figure is
                                read from two 1536-thread cards, so its range is wider */
};

/* Where in a replayed training step a segment was taken. */
enum gm_est_replay_at {
    GM_EST_AT_SETUP = 0, /* before the first step: weights, adapters, buffers */
    GM_EST_AT_FORWARD,   /* a layer's forward (layer 1..L) */
    GM_EST_AT_LOSS,      /* the loss: the logits and the loss's tensors, with its backward */
    GM_EST_AT_BACKWARD,  /* a layer's backward (layer L..1) */
    GM_EST_AT_OPTIMIZER, /* end of backward, optimizer step, zero_grad */
    GM_EST_AT__COUNT
};

/* Peak reserved from the allocation sequence of the training step replayed through the
 * caching-allocator model (src/estimate/step_alloc.c). */
struct gm_est_replay {
    bool used;      /* peak reserved comes from the replay */
    uint64_t steps; /* training steps replayed */
    uint64_t
        steps_counted; /* of those, counted as the step before (its cache had settled), not run */
    uint64_t mallocs;  /* tensor allocations replayed */
    uint64_t requested_peak; /* bytes: largest sum of live tensors (= peak allocated) */
    uint64_t allocated_peak; /* bytes: the same in 512-byte blocks (max_memory_allocated) */
    uint64_t reserved_peak;  /* bytes: max_memory_reserved() of the replay */
    uint64_t capacity_bytes; /* what the allocator could take: GPU minus outside; 0 = no cap */
    uint64_t segments;       /* cudaMalloc calls */
    uint64_t retries;        /* out-of-memory retries after freeing the cache */
    uint64_t stream_reserved[GM_EST_STREAM__COUNT]; /* bytes reserved per enum gm_est_stream at the
                                                       peak */
    /* bytes: each stream's largest sum of live tensors over the replay.  The allocator caches
     * blocks and maps pages per stream, so until it frees its cache (retries 0) reserved is at
     * least the sum of these: what the replay reserves above that sum is the allocator's own */
    uint64_t stream_live_peak[GM_EST_STREAM__COUNT];
    bool oom;         /* a request failed even after the retry */
    bool expandable;  /* replayed with expandable_segments:True (pages mapped per stream) */
    bool wrap;        /* FSDP1's wrap was replayed before the first step (HF Trainer) */
    bool wrap_synced; /* ... with sync_module_states' broadcast buckets */
    bool floor;       /* the fragmentation floor, not the replay, decided peak reserved */
    /* the floor was above the capacity while the replay fits in it: peak reserved stops at
     * the capacity, where the allocator frees its cache and retries (floor_bytes: the floor) */
    bool at_capacity;
    uint64_t floor_bytes;
    /* oom: the request that failed on the capacity even after freeing the cache (request 0:
     * not replayed on the capacity) */
    struct {
        uint64_t request; /* bytes asked for */
        uint64_t live;    /* bytes of tensors live before it */
        unsigned step;    /* replayed step, 0 = the first */
        enum gm_est_replay_at at;
        unsigned layer; /* 1..L in a layer's forward or backward, else 0 */
        enum gm_est_stream stream;
        enum gm_est_kind kind; /* its component's kind; GM_KIND__COUNT: a temporary of the step */
        /* the allocator once it had freed its cache and the cudaMalloc failed again:
         * bytes reserved (segments that hold an allocated block stay), bytes in allocated
         * blocks, and the largest free block of the request's pool on its stream */
        uint64_t reserved, allocated, largest_free;
        /* the segment that holds that largest free block: its bytes, the bytes in use in
         * it, and of those the largest tensor of a component: its kind (GM_KIND__COUNT:
         * only temporaries of the step) and its layer (1..L; 0: none or not a layer's) */
        uint64_t segment, segment_live, pin_bytes;
        enum gm_est_kind pin_kind;
        unsigned pin_layer;
    } failed;
    /* --loss fused --loss-impl unsloth (gm_job_memory.loss_cache_block): the fp32 logits-sized
     * block the replay keeps in the cache beside the loss's own, measured on fms-acceleration's
     * FOAK runs, not read in code: bytes reserved grew by when it was asked for (0 = none,
     * also where a cached block of its size took it), and whether it was left out for want of
     * room on the capacity (the allocator would have freed it and retried) */
    uint64_t loss_cache_block;
    bool loss_cache_no_room;
};

struct gm_est_store; /* private: what backs an estimate's lists */

/* The estimate of one job.  The library allocates it (gm_estimate_run()) and releases it
 * (gm_estimate_free()): fields may be added and lists grow without breaking callers. */
struct gm_estimate {
    enum gm_est_mode mode;
    uint64_t n_params;                   /* parameters used */
    uint64_t largest_layer_params;       /* what ZeRO-3 gathers whole: --largest-layer, the files'
                                            largest module, else the largest tensor; 0 = unknown */
    uint64_t weight_bytes;               /* weights held by one device for this job */
    struct gm_est_component *components; /* n_components; owned by the estimate */
    size_t n_components;
    uint64_t forward_backward_bytes; /* training phase peaks (allocated): max of the two */
    uint64_t backward_start_bytes;   /*   moments of the forward/backward phase */
    uint64_t backward_end_bytes;
    uint64_t optimizer_step_bytes;
    uint64_t prefill_bytes; /* inference phase peaks (allocated) */
    uint64_t decode_bytes;
    enum gm_est_phase peak_phase; /* the phase that dominates */
    uint64_t peak_allocated_bytes;
    uint64_t peak_reserved_bytes;
    uint64_t device_bytes;        /* nvidia-smi view of the largest device */
    double activations_per_token; /* blog method: A as used */
    uint64_t pageable_bytes;      /* paged optimizer: state that may page out */
    struct gm_est_layout layout;
    struct gm_est_lora lora;
    struct gm_est_serving serving;
    struct gm_est_fit fit;
    char (*assumptions)[GM_EST_NOTE_MAX]; /* n_assumptions sentences; owned */
    size_t n_assumptions;
    /* memory techniques: the loss moment; ranges */
    uint64_t loss_bytes;  /* training: allocated at the loss (end of forward, its backward) */
    uint64_t loss_tokens; /* training: tokens one device's loss runs over (an encoder-decoder's
                             target tokens); 0 = no loss (an encoder) */
    uint64_t loss_vocab;  /* training: vocabulary entries of one device's logits (V / tp) */
    struct gm_est_range range;
    struct gm_est_replay replay;
    struct gm_est_context context; /* the CUDA context as used, and where it comes from */
    struct gm_est_store *store;    /* private */
};

/* Run the pipeline on 'job' into *out: NULL on entry makes a new estimate, an estimate of
 * an earlier call is reused (its contents replaced, its storage kept: what a loop of
 * estimates wants).  *out is the caller's to release with gm_estimate_free(), whatever the
 * status (NULL only when it could not be allocated).  GM_ERR_INVALID naming the bad
 * setting (those of gm_job_check(), settings that do not suit the model, results beyond
 * 2^64 bytes), the model's validation error, or GM_ERR_NOMEM. */
enum gm_status gm_estimate_run(const struct gm_job *job, struct gm_estimate **out,
                               struct gm_error *err);
/* Release an estimate and everything it holds; NULL is a no-op. */
void gm_estimate_free(struct gm_estimate *e);

/* One segment (cudaMalloc) the step replay took, in the order it took them. */
struct gm_est_replay_segment {
    uint64_t bytes;           /* the segment */
    uint64_t request;         /* the tensor request that made it */
    uint64_t live;            /* bytes of tensors live before that request */
    uint64_t reserved;        /* bytes reserved with the segment */
    unsigned pass;            /* 0: on the GPU's capacity; 1: the rerun without it after an
                                 out-of-memory (the figures then come from that pass) */
    unsigned step;            /* replayed step, 0 = the first (setup counts as step 0) */
    enum gm_est_replay_at at; /* where in the step */
    unsigned layer;           /* 1..L in a layer's forward or backward, else 0 */
    enum gm_est_stream stream;
    bool measured; /* the --loss fused cache block's segment (gm_est_replay.loss_cache_block):
                      a measured allowance, not a tensor of the code read */
};

typedef void (*gm_est_segment_fn)(void *ctx, const struct gm_est_replay_segment *seg);

/* gm_estimate_run(), calling 'fn' (with 'ctx') for every segment the point estimate's step
 * replay takes (none where no replay runs: out->replay.steps == 0).  Same errors. */
enum gm_status gm_estimate_run_traced(const struct gm_job *job, struct gm_estimate **out,
                                      gm_est_segment_fn fn, void *ctx, struct gm_error *err);

/* "setup", "forward", "loss", "backward", "optimizer"; static storage. */
const char *gm_est_replay_at_name(enum gm_est_replay_at at);

/* "default", "given", "driver_by_sms", "eager", "in_reserve" (the estimate JSON's
 * inputs.cuda_context_source); static storage. */
const char *gm_est_context_source_name(enum gm_est_context_source source);

/* "compute", "unshard", "reduce_scatter" (the keys of the estimate JSON's
 * reserved_by_stream_bytes); static storage. */
const char *gm_est_stream_name(enum gm_est_stream stream);

/* The segments of one replay, in order (gm_estimate_run_segments()). */
struct gm_est_segments {
    struct gm_est_replay_segment *v;
    size_t n;
    size_t cap; /* private */
    bool nomem; /* private */
};

/* gm_estimate_run_traced() collecting every segment into 'segs' (initialised here; release
 * it with gm_est_segments_free(), also after an error).  GM_ERR_NOMEM when the list cannot
 * grow; otherwise the errors of gm_estimate_run(). */
enum gm_status gm_estimate_run_segments(const struct gm_job *job, struct gm_estimate **out,
                                        struct gm_est_segments *segs, struct gm_error *err);
void gm_est_segments_free(struct gm_est_segments *segs);

/* Bytes of 'kind' components of 'e' (all devices alike: one device's share). */
uint64_t gm_estimate_kind_bytes(const struct gm_estimate *e, enum gm_est_kind kind);

/* "weights", "master_weights", ... (JSON); static storage. */
const char *gm_est_kind_name(enum gm_est_kind k);
/* Whether a kind lives outside PyTorch's caching allocator (runtime overheads). */
bool gm_est_kind_outside_allocator(enum gm_est_kind k);
/* The snapshot analysis category (gpumem snapshot categories) that memory of this kind
 * falls in on a real run; false for runtime overheads, which no snapshot holds. */
bool gm_est_kind_category(enum gm_est_kind k, enum gm_category *out);

/* Stable names (CLI choices and JSON); static storage, "unknown" out of range. */
const char *gm_quant_kernel_name(enum gm_quant_kernel k);
/* Where max_model_len came from: "request", "setting", "max_position_embeddings" or
 * "rope_scaling"; static storage, "unknown" out of range. */
const char *gm_max_len_from_name(enum gm_max_len_from f);
const char *gm_precision_name(enum gm_precision p);
const char *gm_optimizer_name(enum gm_optimizer o);
const char *gm_shard_name(enum gm_shard s);
const char *gm_pp_schedule_name(enum gm_pp_schedule s);
const char *gm_engine_name(enum gm_engine e);
const char *gm_fit_reason_name(enum gm_fit_reason r);
/* "fits", "borderline", "does_not_fit", "not_judged". */
const char *gm_fit_verdict_name(enum gm_fit_verdict v);
/* "fragmentation", "cuda_context", ... for one enum gm_est_uncertainty flag. */
const char *gm_est_uncertainty_name(unsigned flag);
const char *gm_est_phase_name(enum gm_est_phase p);
/* "persistent", "forward_backward", ... for a set of phase flags; static storage. */
const char *gm_est_phases_name(unsigned phases);

/* ---- searches, suggestions, the report ---- */

struct gm_est_search {
    enum gm_search what;
    uint64_t value; /* largest value that fits, 0 = none */
    uint64_t shown; /* the value the estimate returned with it is at (value, or the least) */
    bool hit_limit; /* the limit fits: the answer may be larger */
    uint64_t limit; /* the limit used (the model's positions for a context) */
    /* what binds: the verdict one past the answer (or at the least value when none fits) */
    enum gm_fit_reason limited_by;
    char limit_text[GM_EST_NOTE_MAX];
};

/* The largest batch, context (or seq) or vLLM max_model_len at which the job fits
 * (doubling, then bisection, over gm_estimate_run() and the fit verdict).  'out' (may be
 * NULL) receives the estimate at the value found, or at the smallest value when none
 * fits, as gm_estimate_run() gives it.  GM_ERR_INVALID without a GPU. */
enum gm_status gm_estimate_search(const struct gm_job *job, enum gm_search what,
                                  struct gm_est_search *res, struct gm_estimate **out,
                                  struct gm_error *err);

/* What a change costs. */
enum gm_sugg_cost {
    GM_COST_NONE = 0, /* same numerics, same speed */
    GM_COST_SPEED,    /* slower steps: recomputation, communication, host memory */
    GM_COST_NUMERICS, /* lower-precision state or caches */
    GM_COST_QUALITY,  /* fewer trained parameters, quantised weights */
    GM_COST_WORKLOAD, /* less work per step: shorter sequences, fewer at once */
    GM_COST_HARDWARE  /* more or larger GPUs */
};

#define GM_EST_MAX_SUGGESTIONS 64 /* hard cap */

struct gm_est_suggestion {
    char change[128];  /* the settings to add, as the CLI spells them ("--zero 3") */
    const char *trade; /* what it costs, a phrase; static storage */
    enum gm_sugg_cost cost;
    uint64_t device_bytes; /* largest device figure with the change */
    bool fits;
    enum gm_fit_reason reason;
    uint64_t paged_bytes; /* GM_FIT_FITS_PAGED: optimizer state that would live in host
                           * memory, paged in on every step (gm_est_fit.paged_bytes) */
    bool combined;        /* several changes together */
};

/* The suggestions for one job; owns its items (gm_est_suggestions_release()). */
struct gm_est_suggestions {
    size_t n;
    struct gm_est_suggestion *items; /* n: fitting first, cheapest first */
    bool none_fits;                  /* no change, combination or catalog GPU makes the job fit */
    size_t cap;                      /* private */
};

/* When the job does not fit: every applicable change from the candidate table, each run
 * through the pipeline and judged by the fit verdict; when none fits alone, a combination
 * found by search; when nothing fits, none_fits.  'base' is gm_estimate_run(job).  'out'
 * is initialised here; release it with gm_est_suggestions_release(), also after an error. */
enum gm_status gm_estimate_suggest(const struct gm_job *job, const struct gm_estimate *base,
                                   struct gm_est_suggestions *out, struct gm_error *err);
void gm_est_suggestions_release(struct gm_est_suggestions *s);

/* ---- DeepSpeed's estimators (deepspeed.runtime.zero stage_1_and_2 / stage3) ---- */

struct gm_deepspeed_row {
    bool offload_optimizer; /* cpu_offload / offload_optimizer=cpu */
    bool offload_params;    /* ZeRO-3 cpu_offload_params / offload_param=cpu */
    bool zero_init;         /* ZeRO-3 zero.Init */
    uint64_t cpu_bytes;     /* per CPU (node), as DeepSpeed computes it */
    uint64_t gpu_bytes;     /* per GPU */
};

struct gm_deepspeed {
    int stage;                     /* 2 or 3 */
    uint64_t total_params;         /* shared parameters once */
    uint64_t largest_layer_params; /* ZeRO-3: parameters of the largest module */
    uint64_t gpus_per_node;
    uint64_t nodes;
    double buffer_factor; /* additional_buffer_factor, 1.5 */
    size_t n_rows;
    struct gm_deepspeed_row rows[6]; /* in the order DeepSpeed's *_all_cold prints them */
    uint64_t zero_paper[4];          /* gm_zero_paper_model_states() over all GPUs, K = 12 */
};

/* Reproduce estimate_zero2/zero3_model_states_mem_needs_all_cold(): the same formulas, the
 * same float arithmetic and integer truncations, so that the printed figures match to the
 * last digit.  GM_ERR_INVALID for a stage other than 2/3 or zero GPUs/nodes. */
enum gm_status gm_deepspeed_estimate(int stage, uint64_t total_params,
                                     uint64_t largest_layer_params, uint64_t gpus_per_node,
                                     uint64_t nodes, double buffer_factor, struct gm_deepspeed *out,
                                     struct gm_error *err);

/* The ZeRO paper's per-GPU model states (Rajbhandari et al. 2020, Fig. 1 / Table 1):
 * mixed-precision Adam with K = 12 bytes of optimizer state per parameter, N_d
 * data-parallel ranks: baseline (4 + K)P, P_os 4P + KP/N_d, P_os+g 2P + (2 + K)P/N_d,
 * P_os+g+p (4 + K)P/N_d.  out[0..3] in that order, bytes (rounded down). */
void gm_zero_paper_model_states(uint64_t params, uint64_t n_d, unsigned k, uint64_t out[4]);

#define GM_EST_MAX_CATALOG 64

/* How many requests of one length the KV pool serves at once. */
struct gm_est_budget_row {
    uint64_t tokens;   /* prompt + generated, per request */
    uint64_t requests; /* at once, within the engine's own cap */
};

/* Everything `gpumem estimate` answers for one job; the library allocates it
 * (gm_estimate_report_run()) and releases it (gm_estimate_report_free()). */
struct gm_estimate_report {
    struct gm_job job;       /* the job shown: at the value a search found */
    struct gm_estimate *est; /* its estimate */
    bool searched;
    struct gm_est_search search;
    bool has_deepspeed;  /* --method deepspeed */
    bool deepspeed_only; /* no model: DeepSpeed's table over a weights-only base */
    struct gm_deepspeed deepspeed;
    struct gm_est_suggestions suggestions; /* when a GPU is given and the job does not fit */
    size_t n_fits_on; /* without a GPU: catalog GPUs that fit, smallest first */
    size_t *fits_on;  /* n_fits_on catalog indices (gm_gpu_catalog_get()) */
    /* a serving job that fits (vLLM, SGLang, llama.cpp) */
    char *plan;                       /* the engine's command line (gm_estimate_plan()), or NULL */
    struct gm_est_budget_row *budget; /* vLLM, SGLang: requests at once by request length */
    size_t n_budget;
};

/* Run the search the job asks for (if any), the pipeline, DeepSpeed's estimator
 * (--method deepspeed) and, when a GPU is given and the job does not fit, the suggestions;
 * without a GPU, the catalog GPUs it fits on.  *out receives a new report (NULL when it
 * could not be allocated), the caller's to release with gm_estimate_report_free() whatever
 * the status.  Errors of gm_job_check() and gm_estimate_run(). */
enum gm_status gm_estimate_report_run(const struct gm_job *job, struct gm_estimate_report **out,
                                      struct gm_error *err);
/* Release a report and everything it holds; NULL is a no-op. */
void gm_estimate_report_free(struct gm_estimate_report *r);

/* Write the gpumem.estimate/1 JSON document of 'r' to 'f' (what `gpumem estimate --json`
 * prints, byte for byte).  GM_ERR_IO on a write error. */
enum gm_status gm_estimate_report_json(FILE *f, const struct gm_estimate_report *r,
                                       struct gm_error *err);

/* ---- models and GPUs ---- */

/* LoRA adapter parameters of 'm' for rank r and targets (enum gm_lora_target flags):
 * r * (in + out) per targeted linear layer per decoder layer (per expert for MoE MLPs). */
uint64_t gm_lora_params(const struct gm_model *m, uint64_t rank, unsigned targets);

/* Parse "q,k,v,o", "q_proj,v_proj", "attention", "mlp", "all-linear" into target flags. */
enum gm_status gm_lora_targets_parse(const char *s, unsigned *out, struct gm_error *err);

/* Bytes of 'n' NF4 weights in blocks of 'block' with fp32 absmax constants, or with
 * double quantisation (8-bit absmax, one fp32 constant per 256 blocks). */
uint64_t gm_nf4_bytes(uint64_t n, uint64_t block, bool double_quant);

/* KV bytes for llama.cpp's cache type (ggml type id) over 'tokens' cells, all layers, for
 * one sequence in micro-batches of 512 (a window layer holds the window + 512 cells, padded
 * to 256). */
enum gm_status gm_llamacpp_kv_bytes(const struct gm_model *m, uint32_t ggml_type, uint64_t tokens,
                                    uint64_t *bytes, struct gm_error *err);

/* Forwards whose activations pipeline rank 'rank' of 'p' holds at its peak under torch's
 * interleaved 1F1B (ScheduleInterleaved1F1B) with 'v' stages per rank and 'n_mb'
 * micro-batches, counted in stage-forwards (one micro-batch through one of the rank's
 * stages): the warmup's min((v - 1) x mpr + 2 (p - 1 - rank), n_mb x v), mpr = n_mb /
 * max(1, n_mb / p), plus the 1F1B phase's forward before each backward; 0 for bad input. */
uint64_t gm_est_pp_interleaved_in_flight(uint64_t p, uint64_t v, uint64_t n_mb, uint64_t rank);

/* GPU catalog: memory as nvidia-smi reports the total (MiB-exact where known). */
struct gm_gpu {
    const char *name;      /* "H100-80GB" */
    const char *family;    /* space-separated lowercase family names ("h100 h100-sxm") */
    unsigned memory_gb;    /* nominal size in the product name (80), to tell boards apart */
    uint64_t memory_bytes; /* total device memory */
    const char *kind;      /* "data-centre", "workstation" or "consumer" */
    unsigned sm;           /* compute capability x 10 (80 = sm_80, Ampere; 90 = Hopper) */
    bool no_p2p;           /* no peer access between two such boards with NVIDIA's driver */
    uint64_t cuda_bytes;   /* the total cudaMemGetInfo reports, as a public printout (a vLLM
                              log, a device-properties listing) gives it; 0 = not known */
    unsigned sms;          /* streaming multiprocessors (NVIDIA's published specifications) */
    enum gm_gpu_link link; /* how two such boards of one server are connected */
};
size_t gm_gpu_catalog_count(void);
const struct gm_gpu *gm_gpu_catalog_get(size_t i);
/* A catalog GPU from a name as people type it or nvidia-smi prints it ("H100",
 * "NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB", "Tesla T4", "rtx4090").  A name that
 * fits several boards (A100: 40 or 80 GB) is refused with the choices.  GM_ERR_INVALID. */
enum gm_status gm_gpu_lookup(const char *name, const struct gm_gpu **out, struct gm_error *err);
/* gm_gpu_lookup() without the message: NULL when unknown or ambiguous. */
const struct gm_gpu *gm_gpu_find(const char *name);

/* ---- calibration: the estimate of a job held against a snapshot of a real run of it ----
 *
 * gm_calibrate() runs gm_estimate_run() on the job and compares it with the analysis of a
 * memory snapshot (what `gpumem snapshot categories` shows) through the kind -> category
 * map (gm_est_kind_category()), then fits what a short run can tell and predicts other
 * sizes of the job with the fitted values (src/estimate/calibrate.c, docs/calibrate.md).
 *
 * Spans.  A training step is compared span by span: the forward/backward pass (the
 * analysis' forward and backward phases against the estimate's largest moment of it: the
 * loss, the start or the end of backward) and the optimizer step.  When the snapshot has
 * no phases (no stack frames) or the job is inference, the whole run is one span: the
 * snapshot's peak against the estimate's peak moment.  Each span is compared at its
 * highest point, bytes per category (a component's act_grad_share, the loss's gradients
 * of the logits, counts as 'other'), in requested bytes as the trace records them (what the
 * estimate predicts; torch.cuda.max_memory_allocated() also counts the 512-byte
 * rounding).
 *
 * The fit, per measured span.  The categories sized by the parameters (parameter,
 * gradient, optimizer_state, optimizer_temp: the fixed group) get one offset, measured
 * minus predicted: buffers and copies the estimate does not count.  The others
 * (activation, input, other: the workload group, which grows with batch and sequence) are
 * two terms: eager attention's s x s scores (the components' seq2_share), which grow with
 * batch x seq^2 and whose size is the shape of one tensor per layer, are taken as
 * predicted; the rest, which grows with the tokens (layers' per-token tensors, the loss
 * over the vocabulary), gets one scale: the measured workload less the scores over the
 * predicted rest.  When the measured workload is below the predicted scores (the run
 * keeps fewer of them: not eager attention), one scale covers both.  Where the estimate
 * predicts no workload memory in a span (many scripts keep the logits alive through the
 * optimizer step), the measured bytes per token are kept.  Fragmentation: the snapshot's
 * peak reserved minus its allocated peak, per byte of workload memory at the peak.
 *
 * A prediction re-runs the estimate with one setting changed ("batch" = "16") and applies
 * the fit: per span, predicted fixed + offset + seq2 scale x predicted scores + per-token
 * scale x the predicted rest (or measured bytes per token x tokens); the calibrated peak
 * allocated is the largest span, the calibrated peak reserved the largest span plus
 * fragmentation x its workload, never less than the excess the run showed (part of it is
 * segment rounding that does not shrink with the load).  The buffers (parameter memory
 * without a gradient at the optimizer step) are kept as measured. */

enum gm_calib_span_kind {
    GM_CALIB_FORWARD_BACKWARD = 0, /* forward and backward passes */
    GM_CALIB_OPTIMIZER_STEP,       /* optimizer.step() */
    GM_CALIB_RUN,                  /* the whole run as one span */
    GM_CALIB_SPAN__COUNT
};

#define GM_CALIB_MAX_SPANS  2
#define GM_CALIB_MAX_POINTS 32
#define GM_CALIB_MAX_NOTES  64 /* hard cap: notes past it are dropped */

/* One span, predicted and measured at its highest point. */
struct gm_calib_span {
    enum gm_calib_span_kind kind;
    bool observed;                         /* the snapshot has events in this span */
    unsigned moment;                       /* the estimate's moment compared (GM_EST_PHASE_*) */
    int64_t event;                         /* event after which the measured high point holds */
    uint64_t predicted[GM_CATEGORY_COUNT]; /* bytes */
    uint64_t measured[GM_CATEGORY_COUNT];  /* bytes (requested) */
    uint64_t predicted_bytes;              /* totals */
    uint64_t measured_bytes;
    uint64_t predicted_fixed; /* the fixed group (sized by the parameters), bytes */
    uint64_t measured_fixed;
    uint64_t predicted_workload; /* the workload group, bytes */
    uint64_t measured_workload;
    uint64_t predicted_seq2; /* of predicted_workload, the s x s scores (batch x seq^2) */
    /* the fit */
    int64_t fixed_offset;       /* measured_fixed - predicted_fixed, bytes */
    double workload_scale;      /* measured_workload / predicted_workload; 0: none predicted */
    double per_token_scale;     /* the fit of the workload but the scores; 0: none predicted */
    double seq2_scale;          /* the fit of the scores: 1 (as predicted), or per_token_scale
                                   when the measured workload is below them */
    double predicted_per_token; /* workload bytes per token */
    double measured_per_token;
};

/* A prediction point: one job setting given another value. */
struct gm_calib_point {
    char setting[32]; /* the setting's name ("batch") */
    char value[48];   /* its value as gm_job_set() takes it ("16") */
};

struct gm_calib_prediction {
    struct gm_calib_point point;
    enum gm_status status;             /* GM_OK, or why the estimate of this point failed */
    char error[256];                   /* the message when status is not GM_OK */
    uint64_t tokens;                   /* of the changed job */
    uint64_t estimate_allocated_bytes; /* gm_estimate_run() of the changed job, as it is */
    uint64_t estimate_reserved_bytes;
    uint64_t span_bytes[GM_CALIB_MAX_SPANS]; /* calibrated allocated, per span */
    size_t peak_span;                        /* the span that peaks */
    uint64_t allocated_bytes;                /* calibrated peak allocated */
    uint64_t reserved_bytes;                 /* calibrated peak reserved */
};

struct gm_calib_opts {
    int32_t device; /* CUDA index of the snapshot's device; -1: the one with the largest peak */
    size_t n_points;
    struct gm_calib_point points[GM_CALIB_MAX_POINTS];
};

/* The calibration of one job; the library allocates it (gm_calibrate()) and releases it
 * (gm_calibration_free()). */
struct gm_calibration {
    int32_t device;
    struct gm_estimate *est; /* the estimate of the job as given */
    enum gm_est_mode mode;
    char model[64];                  /* the model's name, "" for a parameter count */
    struct gm_job_workload workload; /* of the job as given */
    uint64_t tokens;                 /* batch x seq (training), batch x (context + new tokens) */
    /* the snapshot */
    uint64_t peak_bytes; /* the allocated peak, requested bytes */
    uint64_t peak_reserved_bytes;
    uint8_t peak_phase;     /* enum gm_phase of the peak */
    int32_t peak_iteration; /* -1 outside any */
    uint32_t n_iterations;
    uint64_t leak_bytes_per_iteration; /* what the analysis found leaking (in the fit too) */
    /* Parameter-category bytes without a gradient at the optimizer step (buffers, frozen
     * parameters), where the estimate gives every parameter byte a gradient byte on this
     * device; valid when has_buffer_bytes. */
    bool has_buffer_bytes;
    uint64_t buffer_bytes;
    size_t peak_span; /* the span that holds the snapshot's peak */
    size_t n_spans;
    struct gm_calib_span spans[GM_CALIB_MAX_SPANS];
    /* fragmentation */
    double assumed_fragmentation;    /* the job's setting (of transient memory) */
    uint64_t predicted_excess_bytes; /* the estimate's reserved - allocated */
    uint64_t measured_excess_bytes;  /* the snapshot's peak reserved - allocated peak */
    double fragmentation;            /* fitted: measured excess / workload bytes at the peak */
    size_t n_predictions;
    struct gm_calib_prediction *predictions; /* n_predictions, one per point asked for */
    size_t n_notes;
    char (*notes)[GM_EST_NOTE_MAX]; /* n_notes: what limits the comparison */
    size_t cap_notes;               /* private */
};

/* gm_job_init() for a job to calibrate: training unless --infer is set. */
void gm_calib_job_init(struct gm_job *job);

/* Device -1, no prediction points. */
void gm_calib_opts_init(struct gm_calib_opts *o);

/* Add the points of "NAME=V1,V2,...": NAME a job setting that takes a value ("batch",
 * "seq", "context", ...), each value checked as gm_job_set() checks it.  GM_ERR_INVALID
 * naming the problem, GM_ERR_LIMIT past GM_CALIB_MAX_POINTS. */
enum gm_status gm_calib_add_points(struct gm_calib_opts *o, const char *spec, struct gm_error *err);

/* Hold the estimate of 'job' (training or inference, no search) against device o->device
 * of 'an' (the analysis of the snapshot, borrowed), fit, and predict o->points.  A point
 * whose estimate fails keeps its error in its entry.  *out receives a new calibration
 * (NULL when it could not be allocated), the caller's to release with
 * gm_calibration_free() whatever the status.  Errors: those of gm_estimate_run() for the
 * job, GM_ERR_INVALID (weights-only job, a search, no such device), GM_ERR_NOMEM. */
enum gm_status gm_calibrate(const struct gm_job *job, const struct gm_analysis *an,
                            const struct gm_calib_opts *o, struct gm_calibration **out,
                            struct gm_error *err);
/* Release a calibration and everything it holds; NULL is a no-op. */
void gm_calibration_free(struct gm_calibration *c);

/* "forward_backward", "optimizer_step", "run"; static storage. */
const char *gm_calib_span_name(enum gm_calib_span_kind k);
/* Whether a snapshot category belongs to the fixed group (sized by the parameters). */
bool gm_calib_category_fixed(enum gm_category c);

/* Write the gpumem.calibrate/1 JSON document of 'c' to 'f' (what `gpumem calibrate --json`
 * prints).  GM_ERR_IO on a write error. */
enum gm_status gm_calibration_json(FILE *f, const struct gm_calibration *c, struct gm_error *err);

#pragma GCC visibility pop
#ifdef __cplusplus
}
#endif
#endif
