/* SPDX-License-Identifier: MIT */
/* estimate_ext.h - the options of `gpumem estimate` for real-world setups (model files,
 * LoRA/QLoRA, sharding and parallelism, DeepSpeed's estimator, serving engines, max batch /
 * context search) and their rendering.  cmd_estimate.c splices EST_EXT_OPTS into its option
 * table and calls the functions below around its own flow. */
#ifndef GM_CLI_ESTIMATE_EXT_H
#define GM_CLI_ESTIMATE_EXT_H

#include "estimate_render.h"
#include "opts.h"

#include "gpumem/estimate_ext.h"
#include "gpumem/json.h"
#include "gpumem/modelfile.h"

#include <stdbool.h>
#include <stdio.h>

struct est_ext_opts {
    bool lora, qlora, no_dq, no_upcast, fsdp, off_opt, off_par, sp, paged, eager, fa, max_batch,
        max_ctx;
    bool ddp_view;
    uint64_t rank, gpus, gpn, tp, pp, accum, largest, mml, block, seqs, mnbt, ubatch, bucket;
    uint64_t non_torch;
    double util, dropout;
    const char *targets;
    int zero, engine;
    bool s_rank, s_targets, s_dropout, s_gpus, s_gpn, s_tp, s_pp, s_accum, s_largest, s_zero,
        s_engine;
    bool s_util, s_mml, s_block, s_seqs, s_mnbt, s_ubatch, s_nontorch, s_bucket;
    /* resolved */
    struct gm_estimate_ext x;
    struct gm_estimate_ext_result res;
    struct gm_modelfile file;
    bool have_file;
    bool deepspeed;
    bool ds_only; /* --method deepspeed without a model: DeepSpeed's table alone */
    struct gm_deepspeed ds;
};

extern const char *const est_ext_zero_choices[];
extern const char *const est_ext_engine_choices[];

#define EST_EXT_OPTS(o)                                                                            \
    OPT_FLAG("lora", 0, &(o)->lora, "train LoRA adapters on a frozen base"),                       \
        OPT_FLAG("qlora", 0, &(o)->qlora, "QLoRA: NF4 frozen base (bitsandbytes), bf16 compute"),  \
        OPT_U64("lora-rank", 0, &(o)->rank, "R", "LoRA rank (default 16)", &(o)->s_rank),          \
        OPT_STRING("lora-targets", 0, &(o)->targets, "LIST",                                       \
                   "q,k,v,o,gate,up,down, attention (default), mlp or all-linear"),                \
        OPT_DOUBLE("lora-dropout", 0, &(o)->dropout, "P",                                          \
                   "LoRA dropout (keeps a dropped-out input copy; default 0)", &(o)->s_dropout),   \
        OPT_FLAG("no-double-quant", 0, &(o)->no_dq, "QLoRA without double quantisation"),          \
        OPT_FLAG("no-fp32-upcast", 0, &(o)->no_upcast,                                             \
                 "QLoRA: keep non-NF4 weights bf16 (no prepare_model_for_kbit_training)"),         \
        OPT_U64("gpus", 0, &(o)->gpus, "N", "GPUs in the job (default 1)", &(o)->s_gpus),          \
        OPT_U64("gpus-per-node", 0, &(o)->gpn, "N", "GPUs per node (default min(gpus, 8))",        \
                &(o)->s_gpn),                                                                      \
        OPT_CHOICE("zero", 0, &(o)->zero, est_ext_zero_choices,                                    \
                   "DeepSpeed ZeRO stage 0-3 over the data-parallel GPUs", &(o)->s_zero),          \
        OPT_FLAG("fsdp", 0, &(o)->fsdp, "PyTorch FSDP FULL_SHARD (one decoder layer per unit)"),   \
        OPT_FLAG("offload-optimizer", 0, &(o)->off_opt,                                            \
                 "optimizer state, master weights and step on the CPU"),                           \
        OPT_FLAG("offload-params", 0, &(o)->off_par, "ZeRO-3/FSDP parameters on the CPU"),         \
        OPT_U64("tp", 0, &(o)->tp, "N", "tensor-parallel degree (default 1)", &(o)->s_tp),         \
        OPT_U64("pp", 0, &(o)->pp, "N", "pipeline stages (training, 1F1B; default 1)",             \
                &(o)->s_pp),                                                                       \
        OPT_FLAG("sequence-parallel", 0, &(o)->sp, "Megatron sequence parallelism (with --tp)"),   \
        OPT_U64("bucket-elements", 0, &(o)->bucket, "N",                                           \
                "ZeRO reduce/all-gather bucket in elements (default 5e8)", &(o)->s_bucket),        \
        OPT_FLAG("ddp-bucket-view", 0, &(o)->ddp_view,                                             \
                 "DDP gradient_as_bucket_view=True (no gradient bucket copy)"),                    \
        OPT_U64("grad-accum", 0, &(o)->accum, "N", "micro-batches per optimizer step",             \
                &(o)->s_accum),                                                                    \
        OPT_FLAG("paged-optimizer", 0, &(o)->paged, "bitsandbytes paged optimizer"),               \
        OPT_U64("largest-layer", 0, &(o)->largest, "N",                                            \
                "--method deepspeed: parameters of the largest layer", &(o)->s_largest),           \
        OPT_CHOICE("engine", 0, &(o)->engine, est_ext_engine_choices,                              \
                   "inference engine: hf, vllm or llama.cpp", &(o)->s_engine),                     \
        OPT_DOUBLE("gpu-memory-utilization", 0, &(o)->util, "F",                                   \
                   "vLLM budget share (default 0.9)", &(o)->s_util),                               \
        OPT_U64("max-model-len", 0, &(o)->mml, "T", "vLLM max_model_len (default: the model's)",   \
                &(o)->s_mml),                                                                      \
        OPT_U64("block-size", 0, &(o)->block, "T", "vLLM KV block size (default 16)",              \
                &(o)->s_block),                                                                    \
        OPT_U64("max-num-seqs", 0, &(o)->seqs, "N", "vLLM max_num_seqs (default 256)",             \
                &(o)->s_seqs),                                                                     \
        OPT_U64("max-num-batched-tokens", 0, &(o)->mnbt, "T",                                      \
                "vLLM profile-run tokens (default 8192)", &(o)->s_mnbt),                           \
        OPT_FLAG("enforce-eager", 0, &(o)->eager, "vLLM without CUDA graphs"),                     \
        OPT_SIZE("non-torch", 0, &(o)->non_torch, "SIZE",                                          \
                 "vLLM non-torch memory (default 256MiB, 2GiB at tp >= 2)", &(o)->s_nontorch),     \
        OPT_U64("ubatch", 0, &(o)->ubatch, "N", "llama.cpp n_ubatch (default 512)",                \
                &(o)->s_ubatch),                                                                   \
        OPT_FLAG("flash-attn", 0, &(o)->fa, "llama.cpp flash attention (-fa)"),                    \
        OPT_FLAG("max-batch", 0, &(o)->max_batch, "find the largest --batch that fits the GPU"),   \
        OPT_FLAG("max-context", 0, &(o)->max_ctx,                                                  \
                 "find the largest --seq (training) or --context that fits the GPU")

/* Defaults before parsing. */
void est_ext_opts_init(struct est_ext_opts *o);

/* Whether any option of this file was given. */
bool est_ext_active(const struct est_ext_opts *o);

/* Resolve MODEL: weight files (safetensors / GGUF, read from their headers) or whatever
 * gm_model_resolve() accepts.  Returns 0 or an exit code (message printed). */
int est_ext_resolve_model(const char *cmd, struct est_ext_opts *o, const char *spec,
                          struct gm_model *model);

/* Check the options against the job and fill o->x; 'method_deepspeed' selects DeepSpeed's
 * estimator.  Returns 0 or an exit code (usage errors print and give 64). */
int est_ext_prepare(const char *cmd, struct est_ext_opts *o, struct gm_estimate_inputs *in,
                    bool method_deepspeed, bool train, bool infer);

/* Run the estimate (search included).  GM_OK or an error in 'err'. */
enum gm_status est_ext_run(struct est_ext_opts *o, struct gm_estimate_inputs *in,
                           struct gm_estimate *e, struct gm_error *err);

/* When the job does not fit the GPU: one change at a time to the extended setup (and the
 * helpful ones together) in v->sugg. */
void est_ext_suggestions(const struct est_ext_opts *o, struct est_view *v);

/* Extra human sections (setup, model file, devices, engine, search, DeepSpeed). */
void est_ext_render_text(FILE *f, const struct est_ext_opts *o, const struct est_view *v);
/* Extra JSON fields: "model_file", "setup", "devices", "lora", "serving", "search",
 * "deepspeed". */
void est_ext_render_json(struct gm_json *w, const struct est_ext_opts *o, const struct est_view *v);

/* Release what the options loaded. */
void est_ext_release(struct est_ext_opts *o);

#endif
