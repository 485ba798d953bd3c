/* SPDX-License-Identifier: MIT */
/* estimate_int.h - the estimator's pipeline, library-internal.
 *
 * gm_estimate_run() (driver.c) resolves the job's derived defaults, checks it, and runs
 * the stages in this order, each with the same signature:
 *
 *   est_stage_model      model and weights: parameter count, how the weights are stored
 *   est_stage_train      one training step (arch or blog method)
 *   est_stage_infer      generation as transformers holds it (weights, KV, prefill)
 *   est_stage_adapters   LoRA / QLoRA: the frozen base replaces the full model states
 *   est_stage_parallel   data and tensor parallelism, ZeRO / FSDP, CPU offload
 *   est_stage_pipeline   pipeline stages: figures per stage kind, the largest kept
 *   est_stage_engine     serving engines with their own accounting (vLLM, llama.cpp)
 *   est_stage_runtime    what lives outside the caching allocator, the three figures
 *   est_stage_fit        the one fit verdict
 *
 * A stage reads the job and what earlier stages decided (struct est_ctx, the components
 * and their kinds) and adds or transforms components; it never finds a component by its
 * name.  A stage that does not apply to the job returns GM_OK at once. */
#ifndef GM_ESTIMATE_INT_H
#define GM_ESTIMATE_INT_H

#include "gpumem/estimate.h"
#include "gpumem/units.h"

#include <math.h>

/* Limits on inputs: far above real jobs, low enough that products stay in 64 bits. */
#define EST_MAX_PARAMS ((uint64_t)1 << 50) /* 1.1e15 parameters */
#define EST_MAX_BATCH  ((uint64_t)1 << 20)
#define EST_MAX_TOKENS ((uint64_t)1 << 26) /* per sequence */
#define EST_MAX_BYTES  ((uint64_t)1 << 60) /* any single input size */

/* The job settings by id, in the order of the settings table (gm_job_settings(), --help):
 * job.c's table is indexed by these ids, and the library addresses a setting by its id,
 * never by its name (names are for the edges: the CLI's options, a binding's keywords).
 * A unit test holds each id against its row's name. */
/* clang-format off */
#define EST_SETTINGS(X) \
    X(PARAMETERS) X(BITS) X(RESERVE_GIB) X(TRAIN) X(INFER) X(PRECISION) X(OPTIMIZER) \
    X(OPTIMIZER_IMPL) X(SEQ) X(GRAD_CHECKPOINTING) X(ZERO_GRAD) X(METHOD) \
    X(ACTIVATIONS_PER_TOKEN) X(BATCH) X(ATTENTION) X(CONTEXT) X(NEW_TOKENS) X(KV_DTYPE) \
    X(FULL_LOGITS) X(CUDA_CONTEXT) X(WORKSPACE) X(FRAGMENTATION) X(GPU) X(GPU_MEMORY) X(LORA) \
    X(ALLOC_CONF) \
    X(QLORA) X(LORA_RANK) X(LORA_TARGETS) X(LORA_DROPOUT) X(NO_DOUBLE_QUANT) X(NO_FP32_UPCAST) \
    X(GPUS) X(GPUS_PER_NODE) X(ZERO) X(FSDP) X(OFFLOAD_OPTIMIZER) X(OFFLOAD_PARAMS) X(TP) X(PP) \
    X(PP_SCHEDULE) X(PP_STAGES_PER_RANK) \
    X(SEQUENCE_PARALLEL) X(ASYNC_TP) X(BUCKET_ELEMENTS) X(ZERO_OVERLAP_COMM) X(ZERO_REUSE_DISTANCE) X(DDP_BUCKET_VIEW) X(GRAD_ACCUM) X(PAGED_OPTIMIZER) \
    X(LARGEST_LAYER) X(ENGINE) X(GPU_MEMORY_UTILIZATION) X(MAX_MODEL_LEN) X(BLOCK_SIZE) \
    X(MAX_NUM_SEQS) X(MAX_NUM_BATCHED_TOKENS) X(ENFORCE_EAGER) X(NON_TORCH) X(UBATCH) \
    X(FLASH_ATTN) X(MAX_BATCH) X(MAX_CONTEXT) X(LOSS) X(LOSS_CHUNKS) X(NO_LOSS_CACHE_BLOCK) \
    X(CHECKPOINT_EVERY) \
    X(OPTIMIZER_IN_BACKWARD) X(ACTIVATION_OFFLOAD) X(FUSED_KERNELS) X(COMPILE) X(ADAPTER_DTYPE) \
    X(TOKENS_PER_BATCH) X(FSDP_VERSION) X(NO_RESHARD_AFTER_FORWARD) X(NO_SYNC_MODULE_STATES) \
    X(EP) X(NCCL) X(NO_P2P) X(CUDA_VERSION) X(TRANSFORMERS_VERSION) X(VLLM_VERSION) \
    X(BITSANDBYTES_VERSION) X(QUANT) X(QUANT_BITS) X(GROUP_SIZE) \
    X(REPLICAS) X(MEM_FRACTION_STATIC) X(CONTEXT_LENGTH) X(MAX_RUNNING_REQUESTS) \
    X(CHUNKED_PREFILL_SIZE) X(N_GPU_LAYERS) X(N_CPU_MOE) X(NGL_OUTPUT_LAST) X(STACK) \
    X(KV_CACHE_MEMORY_BYTES) X(FLOAT8) X(IMAGES) X(IMAGE_SIZE) X(TARGET_SEQ) X(LOSS_IMPL) \
    X(FSDP_SHARD_ENDS) X(STATIC_CACHE) X(MODEL_IMPL) X(QUANT_KERNEL) X(FLASHINFER_SAMPLER) X(KV_CPY) \
    X(CP) X(TORCH_VERSION) X(TRL_VERSION)
/* clang-format on */

enum est_setting {
#define EST_SETTING_ENUM(id) EST_SET_##id,
    EST_SETTINGS(EST_SETTING_ENUM)
#undef EST_SETTING_ENUM
        EST_SET__COUNT
};

/* ---- arithmetic ---- */

/* A double byte count, rounded to nearest, saturating at UINT64_MAX. */
static inline uint64_t est_round(double bytes)
{
    if (!(bytes > 0))
        return 0;
    if (bytes >= 18446744073709549568.0)
        return UINT64_MAX;
    return (uint64_t)llround(bytes);
}

/* Bytes of 'n' elements of 'bits' bits each, rounded up to whole bytes (saturating). */
static inline uint64_t est_bits_bytes(uint64_t n, double bits)
{
    double whole = floor(bits);
    /* Integral bit widths are computed exactly in integers. */
    if (whole == bits && bits >= 1 && bits <= 64) {
        uint64_t b = (uint64_t)bits;
        uint64_t q = n / 8, r = n % 8;
        return gm_add_sat(gm_mul_sat(q, b), (r * b + 7) / 8);
    }
    return est_round(ceil((double)n * bits / 8.0));
}

/* a / b rounded up (b = 0: a). */
static inline uint64_t est_div_up(uint64_t a, uint64_t b)
{
    return b ? a / b + (a % b != 0) : a;
}

/* Which end of the range one run of the pipeline computes (ranges: driver.c). */
enum est_bound { EST_POINT = 0, EST_LOW, EST_HIGH };

/* One tensor the step replay allocates or frees (est_run_requests(): tests read the op
 * order through it). */
struct est_replay_request {
    bool alloc;                 /* allocated, else freed */
    uint64_t bytes;             /* the tensor */
    uint64_t live;              /* bytes of tensors live after it */
    unsigned pass, step, layer; /* as in struct gm_est_replay_segment */
    enum gm_est_replay_at at;
};
typedef void (*est_request_fn)(void *ctx, const struct est_replay_request *rq);
/* gm_estimate_run() calling 'fn' for every tensor request and free of the point estimate's
 * step replay (driver.c).  Same errors. */
enum gm_status est_run_requests(const struct gm_job *job, struct gm_estimate **out,
                                est_request_fn fn, void *ctx, struct gm_error *err);

/* What the stages share for one run. */
/* What the caller of a run reads of it: a probe reads less, so the run may do less. */
enum est_reads {
    EST_READS_ALL,     /* everything (gm_estimate_run() and the ends of its range) */
    EST_READS_FIGURES, /* the point estimate's figures and verdict (est_run_point()) */
    /* the verdict alone, fit.fits (est_run_verdict()); the figures of a job that does not fit
     * may be bounds (est_step_replay()) */
    EST_READS_VERDICT,
};

struct est_ctx {
    const struct gm_job *job;     /* resolved: derived defaults filled in */
    const struct gm_model *m;     /* job->model.model, may be NULL */
    struct gm_param_counts pc;    /* the architecture's counts; total = parameters used,
                                     largest_tensor = parameters when not counted */
    uint64_t n;                   /* parameters used */
    uint64_t stored_weight_bytes; /* inference / weights mode: the weights as stored */
    double stored_bits;           /* bits per weight when not from the files */
    bool weights_from_files;      /* stored_weight_bytes are the files' tensor bytes */
    struct gm_estimate *e;
    enum est_bound bound;         /* the point estimate, or an end of the range */
    double tokens;                /* training: tokens of one micro-batch at this bound */
    double host_activation_bytes; /* training: activations offloaded to host, one GPU */
    /* ---- weight formats (bitsandbytes, GPTQ, AWQ, FP8) ---- */
    const struct gm_quant *quant; /* the format the weights are in (est_job_quant), or NULL */
    uint64_t format_bytes;        /* the weights in that format, 0 when plain floats */
    gm_est_segment_fn trace;      /* the step replay's segments (point estimate only), or NULL */
    void *trace_ctx;
    est_request_fn req_trace; /* the step replay's tensor requests (point estimate only) */
    void *req_trace_ctx;
    struct est_replay_memo **replays; /* step replays already run (the point estimate's, shared
                                         with the ends of its range) */
    struct est_load_memo **loads;     /* vLLM load replays already run, shared as 'replays' */
    enum est_reads reads;             /* what the caller reads of the run */
};

/* ---- uncertain.c: the assumptions that spread the range ---- */

/* An uncertain quantity at the run's bound: 'point' in the point estimate and whenever
 * 'known' (the job gives it), else 'low' or 'high'.  Marks 'source' (enum
 * gm_est_uncertainty) in the estimate's range when the ends differ. */
double est_uncertain(struct est_ctx *cx, unsigned source, bool known, double point, double low,
                     double high);

/* The fragmentation factor at the run's bound (uncertain unless --fragmentation is given). */
double est_run_fragmentation(struct est_ctx *cx);
/* A length the job does not give (--seq, --context) is its default, said in the point
 * estimate's assumptions ("sequence length 2048 tokens: not given ..."), never a range: the
 * verdict is about the job as stated. */
void est_length_assumed(struct est_ctx *cx, const char *what, uint64_t tokens, const char *flag);

typedef enum gm_status (*est_stage_fn)(struct est_ctx *cx, struct gm_error *err);

enum gm_status est_stage_model(struct est_ctx *cx, struct gm_error *err);
enum gm_status est_stage_train(struct est_ctx *cx, struct gm_error *err);
enum gm_status est_stage_infer(struct est_ctx *cx, struct gm_error *err);
enum gm_status est_stage_adapters(struct est_ctx *cx, struct gm_error *err);
enum gm_status est_stage_parallel(struct est_ctx *cx, struct gm_error *err);
enum gm_status est_stage_pipeline(struct est_ctx *cx, struct gm_error *err);
enum gm_status est_stage_engine(struct est_ctx *cx, struct gm_error *err);
enum gm_status est_stage_runtime(struct est_ctx *cx, struct gm_error *err);
enum gm_status est_stage_fit(struct est_ctx *cx, struct gm_error *err);

/* ---- components.c ---- */

/* What backs an estimate's lists (the library allocates every struct gm_estimate). */
struct gm_est_store {
    size_t cap_components;           /* room in e->components */
    size_t cap_assumptions;          /* room in e->assumptions */
    bool nomem;                      /* an assumption was lost to a failed allocation */
    struct gm_estimate *ends[2];     /* the runs at the low and high ends of the range, kept
                                        for the next run (driver.c) */
    struct est_replay_memo *replays; /* step replays run into this estimate, by their inputs
                                        (step_alloc.c), NULL until the first */
    struct est_load_memo *loads;     /* vLLM load replays run into it, by their shape
                                        (stage_engine.c), NULL until the first */
};

/* A new, empty estimate (gm_estimate_free() releases it), or NULL. */
struct gm_estimate *est_new(void);
/* Empty 'e' for a new run, keeping its storage. */
void est_reset(struct gm_estimate *e);
/* gm_estimate_run() into 'e', an estimate that exists. */
enum gm_status est_rerun(const struct gm_job *job, struct gm_estimate *e, struct gm_error *err);
/* The point estimate alone into 'e' (a third of est_rerun's work): its fit is the one
 * searches and suggestions judge by; no range, no verdict over it. */
enum gm_status est_run_point(const struct gm_job *job, struct gm_estimate *e, struct gm_error *err);
/* est_run_point() for a caller that reads fit.fits alone: where the job does not fit, the
 * other figures may be less than est_run_point()'s (a replay stopped at the capacity). */
enum gm_status est_run_verdict(const struct gm_job *job, struct gm_estimate *e,
                               struct gm_error *err);
/* gm_estimate_search() probing with the point estimate alone; with 'shown', 'e' then holds
 * the full estimate (range and verdict) at the value shown; without, only res->value,
 * shown and hit_limit are set (the probes judge by the verdict alone, est_run_verdict()),
 * and 'e' holds whatever it last ran. */
enum gm_status est_search(const struct gm_job *job, enum gm_search what, struct gm_est_search *res,
                          struct gm_estimate *e, bool shown, struct gm_error *err);
/* What a test asks of est_suggest(): every change alone with its figures (est_run_point()),
 * as if each were shown, where the search runs only those it reads (the answer is the same);
 * and how many step replays without a limit the search ran. */
struct est_sugg_probe {
    bool settle_all;    /* in */
    uint64_t free_runs; /* out */
};
/* gm_estimate_suggest() with 'probe' (NULL: none). */
enum gm_status est_suggest(const struct gm_job *job, const struct gm_estimate *base,
                           struct est_sugg_probe *probe, struct gm_est_suggestions *out,
                           struct gm_error *err);

/* Append a component; 'note' may be NULL.  GM_ERR_LIMIT past GM_EST_MAX_COMPONENTS,
 * GM_ERR_NOMEM. */
enum gm_status est_add(struct gm_estimate *e, enum gm_est_kind kind, const char *name,
                       uint64_t bytes, unsigned phases, bool transient, enum gm_est_extent extent,
                       const char *note, struct gm_error *err);
/* Make the components of 'to' those of 'from' (another estimate).  GM_ERR_NOMEM. */
enum gm_status est_copy_components(struct gm_estimate *to, const struct gm_estimate *from,
                                   struct gm_error *err);
/* Remove component i (order kept). */
void est_remove(struct gm_estimate *e, size_t i);
/* Append an assumption sentence (printf-style); dropped past GM_EST_MAX_ASSUMPTIONS (and
 * when memory fails, which the run then reports as GM_ERR_NOMEM). */
void est_assume(struct gm_estimate *e, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* Append "; <text>" to a component's note when it fits. */
void est_note_append(struct gm_est_component *c, const char *text);
/* Of the component added last, 'seq2_bytes' (as computed, before rounding) grow with
 * batch x seq^2 and 'act_grad_bytes' are gradients of activations: sets its seq2_share
 * and act_grad_share. */
void est_set_parts(struct gm_estimate *e, double seq2_bytes, double act_grad_bytes);
/* Of the component added last: held by the model's forward alone, freed when it returns
 * (gm_est_component.forward_local). */
void est_set_forward_local(struct gm_estimate *e);
/* The last component added is made of n equal tensors, each allocated on its own. */
void est_set_tensors(struct gm_estimate *e, unsigned n);
/* Of the component added last, the stream that allocates its tensors. */
void est_set_stream(struct gm_estimate *e, enum gm_est_stream stream);
/* Add the bytes of 'c' to 'out' by the snapshot category each part lands in: the kind's
 * category, the activation gradients' share 'other'.  False (nothing added) for what
 * lives outside the caching allocator. */
bool est_component_categories(const struct gm_est_component *c, uint64_t out[GM_CATEGORY_COUNT]);

/* Phase peaks, the dominating phase, peak allocated and peak reserved of 'e' (components
 * inside the caching allocator), with 'fragmentation' x the transient bytes of the peak
 * phase, rounded up to 2 MiB (weights mode: reserved = allocated). */
void est_figures(struct gm_estimate *e, double fragmentation);
/* Bytes outside the caching allocator (runtime overheads) of 'e'. */
uint64_t est_outside_bytes(const struct gm_estimate *e);
/* ---- stage_train.c: what one training step holds ---- */

/* What decides the tensors one transformer layer saves for backward. */
struct est_layer_cfg {
    double ea;                /* bytes of the compute dtype: matmul inputs and outputs */
    double er;                /* bytes of the residual stream: the norms' inputs */
    bool eager;               /* eager attention: the s x s scores are kept */
    bool kv_repeated;         /* the kernel gets K/V expanded to every query head (HF's
                                 repeat_kv before SDPA/flash: est_hf_repeats_kv()) */
    uint64_t seq;             /* tokens per sequence (the attention span) */
    bool norms_trainable;     /* norm weights get gradients (full training) */
    unsigned keeps_in;        /* enum gm_lora_target flags: matmuls whose input is saved (their
                                 weight, or an adapter reading the same tensor, needs it) */
    unsigned fused;           /* enum gm_fused flags */
    bool expert_loop;         /* MoE experts run one after another (HF's loop over experts) */
    uint64_t target;          /* encoder-decoder: target tokens per sequence; 0 = seq */
    bool one_op_gelu;         /* gelu_new as one F.gelu op (LitGPT), not HF's Python formula */
    bool sac_attn_recomputed; /* op-level SAC recomputes the attention: its op is not one the
                                 policy saves (est_titan_sac_recomputes_attention()) */
    double ring_bwd;          /* context parallelism: ring attention's backward buffers, bytes
                                 per local token (est_ring_attention_per_token()) */
};
/* Bytes per element of the training job's residual stream (the norms' inputs, the layer
 * inputs checkpointing keeps): by precision, the frozen base, FSDP and QLoRA's projections. */
double est_residual_bytes(const struct gm_job *job, const struct gm_model *m);
/* The configuration of full training in 'ea' / 'er' bytes (every weight trainable, eager
 * HF modules). */
struct est_layer_cfg est_layer_cfg_full(double ea, double er, bool eager, uint64_t seq);
/* Activation bytes saved for backward by one transformer layer, per token; *seq2 (may be
 * NULL) gets the part of them that is eager attention's s x s scores (n_heads x seq per
 * token: they grow with batch x seq^2). */
double est_layer_saved_per_token(const struct gm_model *m, const struct est_layer_cfg *c,
                                 double *seq2);
/* The average layer's saved bytes per token from its attention, MLP and norm parts, as the
 * model's layer mix (and Mamba-2 mixers) combine them. */
double est_layer_mix_saved(const struct gm_model *m, const struct est_layer_cfg *c, double attn,
                           double mlp, double norm);
/* What torchtitan's op-level selective checkpointing keeps of one layer, per token: the
 * layer input, every other matmul output in forward order, the attention output (unless
 * c->sac_attn_recomputed). */
double est_layer_op_saved_per_token(const struct gm_model *m, const struct est_layer_cfg *c);
/* The largest gradients of activations alive at once in one layer's backward, per token;
 * *seq2 (may be NULL) gets the part of them that is the s x s scores' gradients. */
double est_layer_backward_per_token(const struct gm_model *m, const struct est_layer_cfg *c,
                                    double *seq2);
/* The phases during which parameter gradients are live: from the end of backward through
 * the step; throughout with accumulation or zero_grad to zeros; during backward only when
 * the optimizer steps in backward. */
unsigned est_gradient_phases(const struct gm_job *job);
/* Tokens in one micro-batch: --tokens-per-batch, else batch x seq. */
double est_tokens(const struct gm_job *job);
/* Bytes of one activation element: 4 under fp32 training, else 2 (the 16-bit compute dtype). */
double est_act_elem_bytes(const struct gm_job *job);
/* Whether tensor parallelism runs torch's TP plan (DTensor parallelize_module, as torchtitan's
 * apply_tp): every TP job (tp > 1) but Megatron's.  Its scope: loss_parallel's vocabulary-
 * sharded loss, the lm_head's gathered input under sequence parallelism, AsyncTP. */
bool est_torch_tp_plan(const struct gm_job *job);
/* Whether a trained lm_head saves its input (the final norm's output) for its weight's
 * gradient: not with adapters (a frozen head) nor with a fused linear loss (the kernel
 * recomputes the projection from the hidden states it keeps itself). */
bool est_head_saves_input(const struct gm_job *job);
/* Whether the model's forward (an HF causal LM's: a transformers version given) computes the
 * loss and holds the final norm's output (the head's input) in a local until it returns, where
 * nothing saves it for backward. */
bool est_forward_holds_head_input(const struct gm_job *job, const struct gm_model *m);
/* Full checkpointing with --checkpoint-every k checkpoints (and recomputes in backward) the
 * layers whose 1-based index is a multiple of k (torchtitan _apply_layer_sac,
 * _layer_sac_count % ac_freq == 0, 1f029641): whether layer 'i' (1-based) is one, and how
 * many of 'layers' are. */
bool est_layer_checkpointed(const struct gm_job *job, uint64_t i);
uint64_t est_layers_checkpointed(const struct gm_job *job, uint64_t layers);
/* Whether the job trains with eager attention scores kept (selective checkpointing
 * recomputes them, so it keeps what SDPA keeps). */
bool est_eager_scores(const struct gm_job *job);
/* The loss of an HF causal LM's forward (stage_train.c hf_loss_forms, per architecture and
 * transformers version): */
enum est_hf_loss {
    EST_HF_LOSS_FUNCTION, /* self.loss_function (ForCausalLMLoss), or no HF model (no version) */
    EST_HF_LOSS_UPCAST,   /* the forward upcasts the logits to fp32 and shifts an fp32 copy for
                           * nn.CrossEntropyLoss; its 16-bit logits are a temporary */
    EST_HF_LOSS_INLINE,   /* nn.CrossEntropyLoss on a shifted copy of the compute-dtype logits */
};
enum est_hf_loss est_hf_loss_form(const struct gm_job *job, const struct gm_model *m);
/* Whether transformers' attention class of 'm' expands K/V to every query head (repeat_kv)
 * before its SDPA or flash kernel, which then saves the expanded copies for backward. */
bool est_hf_repeats_kv(const struct gm_job *job, const struct gm_model *m);
/* FSDP1 under the HF stack (stage_parallel.c) */
bool est_fsdp1_hf(const struct gm_job *job);
/* Whether the HF Trainer's forward returns an fp32 copy of every 16-bit output (mixed
 * precision through accelerate, transformers >= 4.30). */
bool est_hf_trainer_fp32_outputs(const struct gm_job *job);

/* ---- stage_engine.c ---- */

/* vLLM and SGLang: how many requests of 'len' tokens the KV pool of 'e' (the job's estimate)
 * holds at once, capped by the engine's own limit (max_num_seqs, --max-running-requests). */
uint64_t est_engine_sequences(const struct gm_job *job, const struct gm_estimate *e, uint64_t len);

/* ---- stage_runtime.c ---- */

/* The driver's context before any kernel loads, by the catalog GPU's SMs (0 if unknown). */
uint64_t est_cuda_bare_context_bytes(const struct gm_job *j);
/* The CUDA context of one device at the run's bound and where its figure comes from: the
 * one rule the device line, the JSON inputs and the engines' budgets read. */
struct gm_est_context est_cuda_context(struct est_ctx *cx);
/* The CUDA context and the NCCL buffers of one device at the run's bound (the serving
 * engine charges them to its budget in some versions). */
uint64_t est_cuda_context_bytes(struct est_ctx *cx);
/* Whether the job's GPUs lack peer access: --no-p2p, or a catalog GPU without it. */
bool est_no_p2p(const struct gm_job *j);
/* Whether NCCL's buffers on this GPU and vLLM's custom all-reduce can use peer access to other
 * GPUs of the node: peer access, and more than one GPU per node (stage_runtime.c). */
bool est_node_peers(const struct est_ctx *cx);
/* NCCL's device memory on one GPU (stage_runtime.c): the rule, or --nccl x communicators. */
uint64_t est_nccl_bytes(struct est_ctx *cx);
/* The part of est_nccl_bytes that is rank 0's alone: vLLM V0's receive connections for the
 * logits' gather (est_nccl_gather_root_bytes), which the other ranks do not hold; 0 where
 * --nccl replaces the rule or no rank gathers. */
uint64_t est_nccl_gather_bytes(struct est_ctx *cx);
/* One communicator as NCCL's rule sees it. */
#define EST_NCCL_MAX_COMMS 4
struct est_nccl_comm {
    uint64_t local_ranks;  /* ranks of the group on this GPU's node (itself included) */
    enum gm_gpu_link link; /* sets the channels */
    unsigned sm;           /* compute capability x 10 (NVLS from 9.0) */
    bool p2p;              /* peer access (the P2P transport); else host memory (SHM) */
    bool cumem;            /* NCCL allocates through cuMem (2 MiB granules) */
};
/* One (send, receive) P2P connection pair's buffers: 2 + 10 MiB. */
uint64_t est_nccl_pair_bytes(void);
/* NCCL's collective channels over the link: 24 NVLink, 2 PCIe. */
unsigned est_nccl_channels(enum gm_gpu_link link);
/* One communicator's device memory at one end of the range, without the device code. */
uint64_t est_nccl_comm_bytes(const struct est_nccl_comm *c, enum est_bound bound);
/* The device code NCCL loads once per process, at one end of the range. */
uint64_t est_nccl_lib_bytes(enum est_bound bound);
/* NCCL's P2P channels to one peer for send/receive: 32 over NVLink, 2 over PCIe. */
unsigned est_nccl_p2p_channels_per_peer(enum gm_gpu_link link);
/* The receive buffers a group's root holds once it has received from every other rank of its
 * node by ncclRecv (PyTorch's gather), beside the collectives' (stage_runtime.c). */
uint64_t est_nccl_gather_root_bytes(const struct est_nccl_comm *c);
/* vLLM's V0 worker from 0.2.7 at tp > 1 without pipeline stages: rank 0 alone gathers the
 * logits over the tensor-parallel group and samples (stage_engine.c). */
bool est_vllm_rank0_gathers(const struct gm_job *j);

/* ---- step_alloc.c: peak reserved from the step's allocation sequence ---- */

/* Whether the step replay runs a checkpointed layer's forward op by op (forward_layer() in
 * step_alloc.c: full checkpointing of every layer, not compiled); else by width. */
bool est_replay_forward_ops(const struct gm_job *job);
/* Whether peak reserved comes from the replay: training with PyTorch's caching allocator,
 * the arch method, a model with layers, no pipeline stages, --fragmentation not given. */
bool est_step_replay_applies(const struct est_ctx *cx);
/* The half of est_step_replay_applies() the job alone decides (no model): what gm_job_check()
 * asks of the replay's own options. */
bool est_step_replay_job_applies(const struct gm_job *j);
/* Whether the step replay keeps the FOAK cache block (step_alloc.c loss_cache_block()): --loss
 * fused with unsloth's kernel (--loss-impl unsloth, as FOAK vendors it), not turned off, on
 * the segments it was measured with (not expandable_segments). */
bool est_loss_cache_block_applies(const struct gm_job *j);
/* A replay that failed on the capacity (r->oom, r->failed.request) although its blocks
 * allocated never add up to more than the capacity (r->allocated_peak, the replay without
 * the limit: the same requests): the bytes were there at every moment, the failure is where
 * the blocks lie (fragmentation); false where more is allocated at once than the GPU holds,
 * or nothing failed. */
bool est_replay_failed_on_layout(const struct gm_est_replay *r);
/* What the allocator model 'a' holds when a request of 'bytes' on 'stream' fails: reserved
 * and allocated now (not at their peaks), and the largest free block of the request's own
 * pool (small: at most 1 MiB) on its own stream (0 when the walk ran out of memory). */
struct est_alloc_failure {
    uint64_t reserved, allocated, largest_free;
    /* the segment that holds the largest free block: where it starts, its bytes and the
     * bytes of the blocks in use in it (what keeps it from being freed or used whole);
     * all 0 where no free block was found */
    uint64_t segment_addr, segment, segment_live;
};
struct gm_alloc;
void est_alloc_at_failure(const struct gm_alloc *a, int64_t stream, uint64_t bytes,
                          struct est_alloc_failure *out);
/* The validation table the block's size was read off (its "# fit:" rows): named by the
 * assumption line and the estimate JSON. */
#define EST_LOSS_CACHE_BLOCK_FIT_ON "fms_a100_80gb_liger"
/* Replay three training steps of the components of cx->e (figures computed) through the
 * caching-allocator model on a device of 'capacity' bytes (0: no limit) and fill 'out'.
 * GM_ERR_NOMEM; the allocator model's own errors. */
enum gm_status est_step_replay(struct est_ctx *cx, uint64_t capacity, struct gm_est_replay *out,
                               struct gm_error *err);
/* Release the replays kept by est_step_replay() (NULL is a no-op). */
void est_replay_memo_free(struct est_replay_memo *m);
/* Add the replays 'from' keeps (may be NULL) to *to, as far as memory allows (a replay not
 * copied only runs again). */
void est_replay_memo_copy(struct est_replay_memo **to, const struct est_replay_memo *from);
/* How many step replays were run into 'e' (its memo's), not answered from it: those without
 * a limit ('free_runs') or those at a capacity.  For tests. */
uint64_t est_step_replay_runs(const struct gm_estimate *e, bool free_runs);

/* ---- arch.c: layer widths and KV layouts ---- */

/* Widths a layer computes per token, averaged over the model's layers. */
struct est_geom {
    double q;          /* queries: heads x head_dim */
    double k;          /* keys kept per token (MLA: per head, decompressed) */
    double v;          /* values kept per token */
    double o_in;       /* attention output (input of o_proj): heads x value head size */
    double latent;     /* MLA low-rank intermediates (q_lora + kv_lora + rope), else 0 */
    double mlp;        /* MLP width run per token: dense, or top-k + shared experts */
    double mlp_max;    /* the widest layer's (dense or top-k + shared) */
    double mlp_widest; /* the widest single MLP (dense, one routed expert, the shared one) */
    double moe_share;  /* share of the layers with routed experts */
};
void est_geom(const struct gm_model *m, struct est_geom *g);
/* Layers of all stacks (encoder + decoder of an encoder-decoder). */
uint64_t est_total_layers(const struct gm_model *m);
/* Layers that keep a KV cache (the decoder's; none in an encoder). */
uint64_t est_kv_layers(const struct gm_model *m);
/* The sliding-window (or chunked local) layers among the KV layers (est_kv_layers()); 0 for a
 * model without a window.  The rest attend to every token. */
uint64_t est_kv_sliding_layers(const struct gm_model *m);
/* What a model's linear-attention layers are, in words ("Mamba-2", "Mamba", "Gated DeltaNet"). */
const char *est_linear_kind(const struct gm_model *m);
/* Layers with routed experts (0 for a dense model). */
uint64_t est_moe_layers(const struct gm_model *m);

/* The graph builders est_llamacpp_placed_bytes() lays out: llm_build_llama/qwen2 (RMSNorm,
 * separate q, k, v, SwiGLU) and llm_build_gptneox (LayerNorm, fused qkv, parallel residual,
 * GELU). */
enum est_llamacpp_layout { EST_LLAMACPP_LLAMA = 0, EST_LLAMACPP_NEOX };

/* The graph llama.cpp reserves its compute buffer for (llama_context::graph_reserve): one
 * micro-batch of n_ubatch tokens, each an output, over a cache of 'cells' cells. */
struct est_llamacpp_graph {
    uint64_t n_ubatch;          /* tokens */
    uint64_t cells;             /* KV cells the masks and scores span */
    uint64_t hidden;            /* elements per token */
    uint64_t q_width;           /* heads x head_dim */
    uint64_t kv_width;          /* KV heads x head_dim */
    uint64_t heads;             /* query heads */
    uint64_t ff;                /* MLP width a token runs through (MoE: x experts used) */
    uint64_t vocab;             /* logits per token */
    bool flash_attn;            /* no materialised scores */
    bool layers_on_gpu;         /* some attention layers compute on this GPU */
    bool output_on_gpu;         /* the output layer's weight is on this GPU */
    uint64_t host_output_bytes; /* the output weight in host memory, bytes */
    uint64_t host_layer_bytes;  /* largest weight of a layer in host memory, bytes */
    /* for est_llamacpp_placed_bytes(): every layer and the output on this GPU */
    enum est_llamacpp_layout layout; /* which builder's graph */
    uint64_t n_layers;               /* repeating layers */
    uint64_t head_dim;               /* elements per head */
    bool qkv_bias;                   /* q, k and v have biases (qwen2) */
    bool kv_cpy; /* KV writes by ggml_cpy, no row-index inputs (before set_rows) */
};

/* Bytes of the GPU's compute buffer ggml-alloc reserves for graph 'g': the largest set of
 * intermediates alive at once (docs/estimate.md, "llama.cpp"). */
uint64_t est_llamacpp_compute_bytes(const struct est_llamacpp_graph *g);
/* Bytes of the same compute buffer for a graph of g->layout with every layer and the output
 * on the GPU, from ggml-alloc's placement of the graph's tensors in execution order
 * (estimate/ggml_alloc.h; the node order of llama.cpp's graph builder is in
 * llamacpp_graph.c).  GM_ERR_NOMEM or GM_ERR_LIMIT from the allocator model. */
enum gm_status est_llamacpp_placed_bytes(const struct est_llamacpp_graph *g, uint64_t *bytes,
                                         struct gm_error *err);

/* Who lays out the KV cache. */
enum est_kv_store { EST_KV_TRANSFORMERS = 0, EST_KV_VLLM, EST_KV_LLAMACPP };
/* Elements per token of one attention layer's K and V rows as 'who' stores them on one of
 * 'tp' GPUs (V 0: a view of K). */
void est_kv_rows(const struct gm_model *m, enum est_kv_store who, uint64_t tp, uint64_t *k,
                 uint64_t *v);
/* K + V elements per token of one attention layer. */
double est_kv_elems(const struct gm_model *m, enum est_kv_store who, uint64_t tp);
/* vLLM: bytes of one request's linear-attention states (every such layer of the largest
 * pipeline stage, on one of 'tp' GPUs); 0 without such layers.  est_vllm_kv_per_token()
 * spreads them over a request of 'len' tokens. */
uint64_t est_vllm_state_bytes(const struct gm_model *m, uint64_t tp, uint64_t pp);
/* Bytes per token and layer of DeepSeek-V3.2's indexer key cache under vLLM; 0 without. */
uint64_t est_vllm_indexer_bytes(const struct gm_model *m);
/* The kernels vLLM runs MXFP4 MoE experts with, by compute capability 'sm' (x 10), vLLM and
 * PyTorch version (0: not given), and the bytes each one's layout adds to one GPU's weights
 * over the checkpoint / tp (stage_engine.c). */
enum est_mxfp4_backend {
    EST_MXFP4_NOT_MODELLED = 0, /* unknown GPU, or Blackwell's FlashInfer paths */
    EST_MXFP4_MARLIN,           /* padded to Marlin's tiles */
    EST_MXFP4_TRITON,           /* triton_kernels, swizzled (Hopper, PyTorch >= 2.8.1) */
    EST_MXFP4_TRITON_STRIDED,   /* triton_kernels, the loaded layout (PyTorch < 2.8.1) */
};
enum est_mxfp4_backend est_vllm_mxfp4_backend(unsigned sm, uint32_t vllm, uint32_t torch);
uint64_t est_vllm_mxfp4_bytes(const struct gm_model *m, enum est_mxfp4_backend backend, uint64_t tp,
                              uint64_t ep);
/* What vLLM's log prints as its KV cache size in tokens for a pool of 'pool' bytes in blocks
 * of 'block' tokens: 'tokens' (the pool's tokens at the bytes a request really holds) unless
 * the model mixes sliding-window or chunked layers with full attention, where from vLLM 0.10
 * ('version' 0: the newest) the log counts every layer as holding every token
 * (stage_engine.c). */
uint64_t est_vllm_tokens_logged(const struct gm_model *m, uint64_t tp, uint64_t pp, unsigned kvb100,
                                uint64_t pool, uint64_t block, uint64_t tokens, uint32_t version);
/* vLLM: KV bytes per token of one request of 'len' tokens on one of 'tp' GPUs of the
 * pipeline stage with the most layers ('pp' stages), at 'kvb100' hundredths of a byte per
 * element.  Full-attention layers hold every token; with the hybrid allocator a
 * sliding-window layer holds at most cdiv(min(window - 1 + chunk, len), block) + 1 blocks
 * (SlidingWindowSpec.max_memory_usage_bytes), so the per-token figure of a long request
 * falls; without sliding layers it is layers x K+V x bytes. */
uint64_t est_vllm_kv_per_token(const struct gm_model *m, uint64_t tp, uint64_t pp, unsigned kvb100,
                               uint64_t len, uint64_t chunk, uint64_t block);

/* vLLM's max_num_batched_tokens and max_num_seqs for 'job' serving requests of up to
 * 'max_model_len' tokens: the settings given, else the defaults of the job's vLLM version for
 * its GPU (stage_engine.c says where each comes from). */
/* vLLM's custom all-reduce IPC buffers on one GPU at tensor parallelism tp (0 where vLLM
 * supports none, where 'p2p' is false: the GPUs have no peer access, or the group spans
 * nodes, or at tp > 2 where 'link' is not NVLink). */
uint64_t est_vllm_custom_allreduce_bytes(uint64_t tp, bool p2p, enum gm_gpu_link link);
/* The non-torch memory a vLLM 'version' (0: the current release) prints on one GPU beside the
 * CUDA context, NCCL and the custom all-reduce: the kernel modules and handles its process
 * loads after the version's baseline (stage_engine.c gives each figure's source). */
uint64_t est_vllm_kernel_bytes(uint32_t version);
/* The display name of the cuBLAS workspaces component (kind GM_KIND_TORCH_WORKSPACE), one
 * for every engine. */
#define EST_TORCH_WORKSPACE_NAME "cublas_workspaces"
/* PyTorch's cuBLAS workspace on the job's GPU, which the caching allocator gives a cuBLAS
 * handle at a process's first GEMM on a stream and keeps (a GM_KIND_TORCH_WORKSPACE component):
 * 32 MiB on compute capability 9.0, else 8.125 MiB (cublas.c). */
uint64_t est_torch_cublas_workspace_bytes(const struct est_ctx *cx);
/* How many of those workspaces the job's process holds on one GPU: one per (handle, stream),
 * a handle per thread: 2 in training (the forward's thread, autograd's device thread), 1 in
 * inference (cublas.c). */
unsigned est_torch_cublas_handles(const struct gm_job *j);
/* Whether the job's PyTorch takes them from its caching allocator (from 1.13), or cuBLAS
 * allocates them itself, outside it (cublas.c). */
bool est_torch_cublas_in_allocator(const struct gm_job *j);
/* The job's cuBLAS workspaces as a GM_KIND_TORCH_WORKSPACE component ("cublas_workspaces",
 * est_torch_cublas_handles() x est_torch_cublas_workspace_bytes(), in every phase of the job's
 * mode), where they are inside the allocator; nothing otherwise.  Training and transformers'
 * inference; vLLM places its own (stage_engine.c). */
enum gm_status est_add_torch_workspaces(struct est_ctx *cx, struct gm_error *err);
/* The NCCL memory vLLM 'version' (0: the current release) counts as non-torch growth because
 * its profile run creates the tensor-parallel device group's communicator: from 0.11 at tp >= 2
 * with peer access within the node ('p2p', est_node_peers), else 0. */
uint64_t est_vllm_profile_nccl_bytes(uint32_t version, uint64_t tp, bool p2p);
/* What vLLM 0.6.4 to 0.6.6 count as non-torch beside the kernels: the free bytes of the
 * caching allocator's partly used segments after a dense decoder's load on one of 't' GPUs of
 * one of 'pp' stages (16-bit, or GPTQ 'q'; 'marlin': repacked by gptq_marlin) and
 * empty_cache(), from a replay through the allocator model (stage_engine.c).  A model or setup
 * the replay does not cover gives 0 and, where 'why' is not NULL, *why names what it is (a
 * static string; NULL when the load was replayed). */
enum gm_status est_vllm_load_cache_gap(const struct gm_model *m, const struct gm_quant *q,
                                       bool marlin, uint64_t t, uint64_t pp, uint64_t *gap,
                                       const char **why, struct gm_error *err);
/* The same replay with the load's GPU temporaries ('temporaries': the copies of fused GPTQ
 * shards into non-contiguous slices) left out when false, so a test can see what they add. */
/* What vLLM 0.3.2 to 0.6.3 charge for the profile run beyond its allocated peak: the reserved
 * peak less the allocated peak of the first two decoder layers of 'tokens' tokens on one of 't'
 * GPUs, replayed through the caching allocator (dense layers with a gated MLP; else 0). */
enum gm_status est_vllm_profile_reserve(const struct gm_model *m, uint64_t tokens, uint64_t t,
                                        uint64_t *extra, struct gm_error *err);
/* The bytes PyTorch's allocator counts as allocated after that load (whole blocks, as
 * allocated_bytes.all.current has them): what vLLM's DeviceMemoryProfiler reports as the
 * weights; 0 (and *why) where the load is not replayed. */
/* Both from one replay of the load: the allocated bytes and the cache gap (above).  'memo'
 * (may be NULL: none) keeps the replays run, by the inputs they read: a load of the same
 * shape is answered from it. */
enum gm_status est_vllm_load(const struct gm_model *m, const struct gm_quant *q, bool marlin,
                             uint64_t t, uint64_t pp, struct est_load_memo **memo,
                             uint64_t *allocated, uint64_t *gap, const char **why,
                             struct gm_error *err);
/* Release the load replays kept by est_vllm_load() (NULL is a no-op). */
void est_load_memo_free(struct est_load_memo *m);
/* Add the load replays 'from' keeps (may be NULL) to *to, as far as memory allows. */
void est_load_memo_copy(struct est_load_memo **to, const struct est_load_memo *from);
/* How many loads were replayed into 'e' (its memo's), not answered from it: for tests. */
uint64_t est_vllm_load_runs(const struct gm_estimate *e);
enum gm_status est_vllm_load_allocated(const struct gm_model *m, const struct gm_quant *q,
                                       bool marlin, uint64_t t, uint64_t pp, uint64_t *allocated,
                                       const char **why, struct gm_error *err);
enum gm_status est_vllm_load_cache_replay(const struct gm_model *m, const struct gm_quant *q,
                                          bool marlin, bool temporaries, uint64_t t, uint64_t pp,
                                          uint64_t *gap, const char **why, struct gm_error *err);
/* The batch sizes vLLM captures CUDA graphs for at 'tokens' batched tokens and 'seqs'
 * sequences, by --vllm-version; the largest in *largest. */
uint64_t est_vllm_graph_sizes(const struct gm_job *job, uint64_t tokens, uint64_t seqs,
                              uint64_t *largest);
/* The full-model CUDA graphs vLLM captures: one per size in V0, one per decode batch size up
 * to max_num_seqs in V1 from 0.11 (FULL_AND_PIECEWISE), none in V1 before. */
uint64_t est_vllm_full_graphs(const struct gm_job *job, uint64_t tokens, uint64_t seqs);
/* Where vLLM runs an all-reduce captured in its CUDA graphs (stage_engine.c). */
enum est_vllm_graph_ar {
    EST_VLLM_GRAPH_AR_CUSTOM,    /* vLLM's custom all-reduce kernel on IPC-registered inputs */
    EST_VLLM_GRAPH_AR_NCCL_NODE, /* NCCL within a node (P2P or SHM transport) */
    EST_VLLM_GRAPH_AR_NCCL_NET,  /* NCCL across nodes (network transport, proxy callback) */
    EST_VLLM_GRAPH_AR_PATHS
};
/* The path's display text, the graph bytes one captured all-reduce of it adds, and the
 * validation rows that figure is read from (static storage). */
const char *est_vllm_graph_ar_name(enum est_vllm_graph_ar path);
uint64_t est_vllm_graph_ar_bytes(enum est_vllm_graph_ar path);
const char *est_vllm_graph_ar_fit_on(enum est_vllm_graph_ar path);
/* The all-reduces vLLM captures in all its CUDA graphs on one GPU of 'job' (2 x the stage's
 * layers in each size's graphs at tp >= 2, + 1 where 'embedding': the stage holds the
 * embedding; none at tp 1), by path into n[]: the custom all-reduce where 'custom_ar' (enabled
 * for the job) and the input is under its max_size, else NCCL, across nodes where
 * 'spans_nodes'.  Returns the graph memory they add. */
uint64_t est_vllm_graph_allreduces(const struct gm_job *job, uint64_t tokens, uint64_t seqs,
                                   bool custom_ar, bool spans_nodes, bool embedding,
                                   uint64_t n[EST_VLLM_GRAPH_AR_PATHS]);
/* Whether vLLM V1 captures no full decode graphs for the job's attention backend (TRITON_MLA
 * below compute capability 9.0, from 0.11 as a version given). */
bool est_vllm_mla_piecewise_only(const struct gm_job *job);
/* Whether vLLM runs its model runner V2 for the job (version and model kind), and the bytes
 * per logit its profile-run sampler holds (stage_engine.c gives the code of each). */
bool est_vllm_runner_v2(const struct gm_job *job, const struct gm_model *m);
unsigned est_vllm_sampler_bytes_per_logit(const struct gm_job *job, const struct gm_model *m);
void est_vllm_batch(const struct gm_job *job, uint64_t max_model_len, uint64_t *tokens,
                    uint64_t *seqs);
/* The max_model_len vLLM derives from the model's positions and its rope_scaling when none is
 * given (0 when the model gives no positions). */
uint64_t est_vllm_max_len(const struct gm_model *m);
/* The longest request 'j''s engine serves model 'm' at when no length is given (vLLM:
 * est_vllm_max_len; otherwise max_position_embeddings); 0 without positions. */
uint64_t est_engine_max_len(const struct gm_job *j, const struct gm_model *m);

/* Whether 't'-way tensor parallelism splits the model's heads: the query heads evenly,
 * the KV heads evenly or replicated when there are fewer of them than t. */
bool est_tp_divides(const struct gm_model *m, uint64_t t);

/* Parameters of the largest linear layer inside a decoder layer, and of one decoder
 * layer (what FSDP wraps as a unit). */
uint64_t est_largest_linear(const struct gm_model *m);
uint64_t est_layer_params(const struct gm_model *m, const struct gm_param_counts *pc);

/* ---- weights.c: weight formats ---- */

struct est_format {
    uint64_t bytes;     /* all the weights */
    uint64_t quantised; /* parameters stored in the format */
    uint64_t plain;     /* parameters left in plain floats */
    uint64_t constants; /* bytes beyond the packed values: scales, zeros, absmax, g_idx */
};
/* The weights of a model (its counts 'pc') in format 'q'; what the format leaves alone
 * takes 'plain' bytes per parameter. */
void est_format_weights(const struct gm_param_counts *pc, const struct gm_quant *q, unsigned plain,
                        struct est_format *out);
/* The weight format the job computes with: --quant, else the checkpoint's own; NULL for
 * plain floats (and for --bits, which is no format). */
const struct gm_quant *est_job_quant(const struct gm_job *job);
/* Whether bitsandbytes runs as Lightning Fabric's BitsandbytesPrecision (LitGPT, --model-impl
 * litgpt): every nn.Linear converted, the lm_head too, each quantised from an fp16 copy
 * (weights.c). */
bool est_bnb_lightning(const struct gm_job *job);
/* The 16-bit copies of one weight that bitsandbytes' MatMul4Bit holds while it dequantises it
 * for a matmul: 1, or 2 when the quantisation state's dtype is not the compute dtype (the
 * dequantised weight, then its cast). */
unsigned est_bnb_dequant_copies(const struct gm_job *job);
/* Whether Lightning's BitsandbytesPrecision computes in fp16 (its quantisation state's
 * dtype): training under fp16-mixed, serving on a GPU without bf16 (weights.c). */
bool est_bnb_compute_fp16(const struct gm_job *job);

/* ---- fit.c ---- */

/* Judge 'e' (figures final) for the job on devices of 'capacity' bytes. */
void est_judge(const struct gm_job *job, const struct gm_estimate *e, uint64_t capacity,
               struct gm_est_fit *fit);
/* The range of 'e' from the runs at the low and high ends ('lo', 'hi', judged on the same
 * capacity), and the three-way verdict with its margin. */
void est_judge_range(struct gm_estimate *e, const struct gm_estimate *lo,
                     const struct gm_estimate *hi);

/* ---- job.c ---- */

/* What the job implies. */
/* The memory manager that holds the job's tensors. */
enum est_allocator {
    EST_ALLOC_ONCE = 0, /* weights only: loaded once, nothing freed and reused */
    EST_ALLOC_TORCH,    /* PyTorch's caching allocator (training, transformers inference) */
    EST_ALLOC_VLLM,     /* PyTorch's, with vLLM's KV pool allocated once, up front */
    EST_ALLOC_GGML,     /* llama.cpp: exact ggml buffers */
    EST_ALLOC_SGLANG    /* PyTorch's, with SGLang's token pool allocated once, up front */
};
enum est_allocator est_allocator(const struct gm_job *job);

/* Bytes per element of the weights / gradients (2 or 4) and of optimizer moments. */
/* --torch-version given and before 2.0 */
bool est_torch_before_2(const struct gm_job *job);
unsigned est_weight_elem_bytes(enum gm_precision p);
/* Whether the precision runs under torch.autocast (fp16-mixed, bf16-mixed): matmuls, adapters'
 * included, take 16-bit casts of their inputs and weights. */
bool est_precision_autocast(enum gm_precision p);
/* Bytes per element of LoRA adapters: --adapter-dtype, else bf16 under TRL's cast before 0.9
 * (est_trl_casts_adapters_bf16()), else fp32 (PEFT's autocast_adapter_dtype) unless
 * --precision bf16. */
unsigned est_adapter_bytes(const struct gm_job *job);
/* The frozen base under a LoRA adapter, as far as fused LoRA and the replay's linears care:
 * plain floats (or no adapter), bitsandbytes 4-bit (--qlora), or GPTQ (--quant gptq or a
 * GPTQ checkpoint) (stage_adapters.c). */
/* --lora-targets' short name of one enum gm_lora_target flag ("q", ..., "down", "qkv");
 * "unknown" otherwise (job.c, beside the parser). */
const char *est_lora_target_name(unsigned t);
enum est_lora_base { EST_LORA_BASE_PLAIN, EST_LORA_BASE_BNB4, EST_LORA_BASE_GPTQ };
enum est_lora_base est_lora_base(const struct gm_job *job);
/* Whether unsloth's fused LoRA autograd functions (FOAK fused_lora) run the adapter of LoRA
 * target 't' (one enum gm_lora_target flag) in 'job': only on a bitsandbytes or GPTQ base
 * (stage_adapters.c). */
bool est_fused_lora_runs(const struct gm_job *job, unsigned t);
/* Bytes per parameter of a frozen base's parameters that are not quantised (embeddings,
 * lm_head, norms): fp32 with QLoRA's fp32 upcast or --precision fp32, else 16-bit. */
unsigned est_frozen_rest_bytes(const struct gm_job *job);
/* QLoRA under TRL's SFTTrainer (--trl-version >= 0.7.5, bf16 AMP, not sharded): its
 * peft_module_casting_to_bf16 runs after PEFT's fp32 upcast (job.c). */
bool est_trl_casts_bf16(const struct gm_job *job);
/* ... and, before TRL 0.9, casts the LoRA adapters to bf16 too (their gradients and optimizer
 * state follow: est_adapter_bytes()). */
bool est_trl_casts_adapters_bf16(const struct gm_job *job);
/* ... on a model whose HF embedding and head names are known to be embed_tokens and lm_head
 * (gm_arch_hf_embed_names()): the embeddings and lm_head back in bf16, the norms fp32. */
bool est_trl_casts_embeddings_bf16(const struct gm_job *job, const struct gm_model *m);
/* The fragmentation factor the job's allocator has: PyTorch's caching allocator for
 * training and transformers inference; none for engines that preallocate exact buffers. */
double est_fragmentation(const struct gm_job *job);

/* The row of setting 'id' in the settings table. */
const struct gm_job_setting *est_setting(enum est_setting id);
/* Whether gm_job_set() (or est_job_put()) was given setting 'id'. */
bool est_given(const struct gm_job *job, enum est_setting id);
/* Pipeline schedules (stage_pipeline.c).  The micro-batches of one step under --pp, decided
 * here from the values alone (whoever set them): parallel.pp_microbatches when set, else
 * workload.grad_accum when above 1, else the pipeline's degree (torchtitan's default
 * pipeline_parallel_microbatches, pipelining_utils.py at 9dec370). */
uint64_t est_pp_microbatches(const struct gm_job *j);
/* AsyncTP's SymmetricMemory workspace on one GPU (stage_runtime.c), 0 without --async-tp. */
uint64_t est_symm_mem_bytes(const struct gm_job *j, const struct gm_model *m);
/* Mark or forget that setting 'id' was given (the suggestion engine changes settings). */
void est_job_mark(struct gm_job *job, enum est_setting id, bool given);
/* gm_job_set() of setting 'id' from its text. */
enum gm_status est_job_set(struct gm_job *job, enum est_setting id, const char *value,
                           struct gm_error *err);
/* Set setting 'id' from its parsed value 'v' (what gm_job_set() does after parsing the
 * text), checking the value's range; remembers that it was given.  GM_ERR_INVALID as
 * gm_job_set(). */
enum gm_status est_job_put(struct gm_job *job, enum est_setting id, const union gm_job_value *v,
                           struct gm_error *err);

/* Set setting 'id' from its text as a stack preset's default: nothing when the setting was
 * given; otherwise stored (and its setter run) without marking it given, remembered as the
 * preset's (est_preset_set()) until a later gm_job_set() gives it.  GM_ERR_INVALID as
 * gm_job_set(). */
enum gm_status est_job_preset(struct gm_job *job, enum est_setting id, const char *value,
                              struct gm_error *err);
/* Whether torchtitan's op-level SAC recomputes the attention in backward: the releases that
 * run cuDNN's SDPA first on compute capability 10 and above, whose op their save list lacks
 * (stacks.c). */
bool est_titan_sac_recomputes_attention(const struct gm_job *job);
/* Whether the --stack preset set setting 'id' and nothing gave it since. */
bool est_preset_set(const struct gm_job *job, enum est_setting id);
/* A version's text (MAJOR.MINOR[.PATCH]) packed by GM_VERSION(), or 0 with 'err' filled
 * (the message naming --'name'). */
uint32_t est_parse_version_or_zero(const char *name, const char *s, struct gm_error *err);
/* A version packed by GM_VERSION() as MAJOR.MINOR.PATCH text in 'b' (n bytes); returns 'b'. */
const char *est_version_text(uint32_t v, char *b, size_t n);

/* --stack NAME[@VERSION] (src/estimate/stacks.c): the family the suggestions may name and
 * the preset's defaults for every setting not given.  GM_ERR_INVALID for an unknown name
 * or a bad version. */
enum gm_status est_stack_apply(struct gm_job *job, const char *spec, struct gm_error *err);
struct est_ctx;
/* The preset's choices still in force, each as an assumption with its source. */
void est_stack_assume(struct est_ctx *cx);
/* The same, as the JSON array "stack_preset" of the inputs. */
struct gm_json;
void est_stack_json(struct gm_json *w, const struct gm_job *job);
/* The --stack name of the job ("hf" without a preset); static storage. */
const char *est_stack_name(const struct gm_job *job);
/* Whether the job's stack can run torch's AsyncTP (stacks.c's table): torchtitan, or a
 * custom torch loop (no --stack). */
bool est_stack_async_tp(const struct gm_job *job);

/* The job with its derived defaults filled in (gpus = tp x pp, ZeRO-3 for --method
 * deepspeed, nodes). */
void est_job_resolve(struct gm_job *job);
/* Whether the job is served by an engine that shards one copy over GPUs (vLLM, SGLang). */
bool est_engine_shards(const struct gm_job *job);
/* Whether its tensor parallelism comes from --gpus (no --tp given): est_job_resolve(). */
bool est_tp_from_gpus(const struct gm_job *job);
/* Data-parallel ranks of a resolved job: gpus / (tp x pp). */
uint64_t est_data_parallel(const struct gm_job *job);
/* Context parallelism's ring attention (torch.distributed.tensor.experimental context_parallel,
 * all-gather rotation): the bytes per local token its forward (backward = false) or backward
 * holds beside the attention op's own tensors, at the model's full attention width (tensor
 * parallelism divides them later); 0 without --cp. */
double est_ring_attention_per_token(const struct gm_job *job, const struct gm_model *m,
                                    bool backward);
/* One rank's forward ring tensors for one attention call over 'tokens' local tokens, in the
 * order the call allocates them (contiguous k and v, k|v, the all-gathered k|v, the merger's
 * fp32 output, a block's fp32 output and the update's difference): the heads split over the
 * tensor-parallel ranks.  Returns how many it wrote (EST_RING_PARTS; 0 without --cp). */
#define EST_RING_PARTS 7
size_t est_ring_attention_parts(const struct gm_job *job, const struct gm_model *m, double tokens,
                                uint64_t part[EST_RING_PARTS]);
/* Their sum. */
uint64_t est_ring_attention_bytes(const struct gm_job *job, const struct gm_model *m,
                                  double tokens);
/* The value 'v' of setting 'id' as the user types it ("3", "fp8", "0.95"; "" for a flag). */
void est_setting_value_text(enum est_setting id, const union gm_job_value *v, char *out, size_t n);
/* The --quant choices, in the order of the setting's choices (the value est_job_put() takes). */
enum est_quant_choice {
    EST_QUANT_INT8 = 0,
    EST_QUANT_NF4,
    EST_QUANT_NF4_DQ,
    EST_QUANT_FP4,
    EST_QUANT_FP4_DQ,
    EST_QUANT_GPTQ,
    EST_QUANT_AWQ,
    EST_QUANT_FP8,
    EST_QUANT_FP8_CHANNEL,
    EST_QUANT_FP8_BLOCK,
    EST_QUANT_W4A16,
    EST_QUANT_W8A16,
    EST_QUANT_MXFP4,
    EST_QUANT_NVFP4,
    EST_QUANT__COUNT
};
/* The --quant choice that names format 'q' ("nf4-dq", "fp8-block"). */
const char *est_quant_setting_name(const struct gm_quant *q);
/* llama.cpp's cache type (ggml type id) for the job's KV dtype; false when it has none. */
bool est_llamacpp_kv_type(enum gm_dtype t, uint32_t *ggml_type);

/* ---- search.c ---- */

/* The job with a searched value set: batch, seq or context (and vLLM's max_model_len
 * with it), or max_model_len. */
void est_search_job(const struct gm_job *job, enum gm_search what, uint64_t v, struct gm_job *out);

/* ---- gpus.c ---- */

/* Catalog indices in ascending capacity order (stable); returns the count. */
size_t est_gpus_by_size(size_t *idx, size_t max);

#endif
