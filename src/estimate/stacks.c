/* SPDX-License-Identifier: MIT */
/* stacks.c - training-stack presets: --stack NAME[@VERSION] sets the defaults that stack's
 * own code uses, each row cited to the file (and release) it was read in.
 *
 * A row names a setting by id and its value as the setting's own text, so the value is
 * parsed and checked by the settings table like any option.  Rows apply only to settings
 * not given (est_job_preset()), so explicit options win in either order on the command
 * line; the estimate names every preset value still in force as an assumption, with its
 * source.  Versions: a row holds from 'from' up to (not including) 'until' (0: no bound);
 * no @VERSION takes the newest rows.  Stacks without rows ("hf", "megatron") only say which
 * family the suggestions may name. */
#include "estimate/estimate_int.h"

#include "gpumem/json.h"

#include <stdio.h>
#include <string.h>

struct stack_row {
    enum gm_stack_preset stack;
    enum est_setting id;
    uint32_t from, until; /* versions of the stack the row holds for */
    const char *value;    /* the setting's text; NULL: the preset's own version */
    const char *source;   /* where the stack's code says so */
};

/* async_tp: whether the stack can run torch's AsyncTP (Inductor's micro-pipeline TP fusing
 * sequence parallelism's collectives with the matmuls over a SymmetricMemory workspace):
 * torchtitan's apply_tp turns it on (enable_async_tensor_parallel, parallelize_llama.py at
 * 9dec370), and a custom torch loop (no --stack) can do the same.  Megatron overlaps its TP
 * communication through TransformerEngine's userbuffers instead, another buffer; the other
 * stacks have no such switch. */
static const struct {
    const char *name;
    enum gm_framework family;
    const char *version_default; /* the version assumed without @V, for a row valued NULL */
    bool async_tp;
} stacks[GM_STACK__COUNT] = {
    [GM_STACK_NONE] = {NULL, GM_FRAMEWORK_HF, NULL, true},
    [GM_STACK_HF] = {"hf", GM_FRAMEWORK_HF, NULL, false},
    [GM_STACK_HF_TRAINER] = {"hf-trainer", GM_FRAMEWORK_HF, "4.57", false},
    [GM_STACK_ACCELERATE] = {"accelerate", GM_FRAMEWORK_HF, NULL, false},
    [GM_STACK_AXOLOTL] = {"axolotl", GM_FRAMEWORK_HF, NULL, false},
    [GM_STACK_UNSLOTH] = {"unsloth", GM_FRAMEWORK_HF, NULL, false},
    [GM_STACK_TORCHTUNE] = {"torchtune", GM_FRAMEWORK_TORCHTUNE, NULL, false},
    [GM_STACK_TORCHTITAN] = {"torchtitan", GM_FRAMEWORK_TORCHTITAN, NULL, true},
    [GM_STACK_LIGHTNING] = {"lightning", GM_FRAMEWORK_LIGHTNING, NULL, false},
    [GM_STACK_MEGATRON] = {"megatron", GM_FRAMEWORK_MEGATRON, NULL, false},
};

#define V     GM_VERSION
#define TT    "pytorch/torchtune "
#define TT_CF "llama3_1/8B_full.yaml "
#define TITAN "pytorch/torchtitan v0.2.2 73a0e69 "
#define ACC   "huggingface/accelerate v1.13.0 e6ee133 "
#define AXO   "axolotl v0.8.0 to v0.18.0 2f5cb9d "
#define UNS   "unslothai/unsloth 015bdef "

/* Each source fits an assumption (GM_EST_NOTE_MAX) beside "--stack NAME@V: --SETTING VALUE". */
static const struct stack_row rows[] = {
    /* torchtune: the distributed full fine-tune recipe and its configs */
    {GM_STACK_TORCHTUNE, EST_SET_PRECISION, 0, 0, "bf16",
     TT TT_CF "dtype: bf16, v0.2.1 83557aa to v0.6.1 a6290a5"},
    {GM_STACK_TORCHTUNE, EST_SET_GRAD_CHECKPOINTING, 0, 0, "full",
     TT TT_CF "enable_activation_checkpointing: True, v0.2.1 to v0.6.1"},
    {GM_STACK_TORCHTUNE, EST_SET_LOSS, 0, V(0, 3, 0), "full",
     TT "v0.2.1 modules/transformer.py: self.output(h).float(), nn.CrossEntropyLoss"},
    {GM_STACK_TORCHTUNE, EST_SET_LOSS, V(0, 3, 0), 0, "chunked",
     TT "v0.3.0 651a730 to v0.6.1: CEWithChunkedOutputLoss, 8 chunks"},
    {GM_STACK_TORCHTUNE, EST_SET_OPTIMIZER_IMPL, 0, V(0, 4, 0), "for-loop",
     TT TT_CF "AdamW foreach: False, v0.2.1 and v0.3.0"},
    {GM_STACK_TORCHTUNE, EST_SET_OPTIMIZER_IMPL, V(0, 4, 0), 0, "fused",
     TT TT_CF "AdamW fused: True, v0.4.0 03a4b1e to v0.6.1"},
    /* QLoRA without PEFT: the model is built in the recipe's dtype and only the linears
     * become NF4 (FrozenNF4Linear or LoRALinear(quantize_base=True)); the embedding, the
     * tied output and the norms stay bf16 */
    {GM_STACK_TORCHTUNE, EST_SET_NO_FP32_UPCAST, 0, 0, "true",
     TT "1814feb models/llama3_2/_component_builders.py: nn.Embedding, RMSNorm in bf16"},
    {GM_STACK_TORCHTUNE, EST_SET_FSDP_VERSION, 0, V(0, 3, 0), "1",
     TT "v0.2.1 full_finetune_distributed.py: FullyShardedDataParallel FULL_SHARD"},
    {GM_STACK_TORCHTUNE, EST_SET_FSDP_VERSION, V(0, 3, 0), 0, "2",
     TT "v0.6.1 training/_distributed.py shard_model: fully_shard"},
    {GM_STACK_TORCHTUNE, EST_SET_FSDP_SHARD_ENDS, V(0, 3, 0), 0, "true",
     TT TT_CF "custom_sharded_layers: ['tok_embeddings', 'output'], v0.3.0 to v0.6.1"},
    /* torchtitan: the job config's defaults and the llama3 parallelize plan */
    {GM_STACK_TORCHTITAN, EST_SET_GRAD_CHECKPOINTING, 0, 0, "full",
     TITAN "config/job_config.py: AC mode selective, selective_ac_option 2"},
    {GM_STACK_TORCHTITAN, EST_SET_CHECKPOINT_EVERY, 0, 0, "2",
     TITAN "job_config.py selective_ac_option 2: every 2nd block"},
    {GM_STACK_TORCHTITAN, EST_SET_OPTIMIZER_IMPL, 0, 0, "fused",
     TITAN "job_config.py: Optimizer implementation fused"},
    {GM_STACK_TORCHTITAN, EST_SET_FSDP_VERSION, 0, 0, "2",
     TITAN "llama3 parallelize.py apply_fsdp: fully_shard per block"},
    {GM_STACK_TORCHTITAN, EST_SET_FSDP_SHARD_ENDS, V(0, 2, 0), 0, "true",
     TITAN "apply_fsdp: tok_embeddings, [norm, output] own units (from 83e6941)"},
    {GM_STACK_TORCHTITAN, EST_SET_LOSS, 0, 0, "full",
     TITAN "components/loss.py cross_entropy_loss: pred.float(); compiled with --compile"},
    /* the launch script sets the allocator's configuration for every run it starts (from
     * a5e57e4, torchtitan PR #643, October 2024, before the first release) */
    {GM_STACK_TORCHTITAN, EST_SET_ALLOC_CONF, 0, 0, "expandable_segments:True",
     TITAN "run_train.sh: PYTORCH_ALLOC_CONF=expandable_segments:True"},
    /* the HF family: the model's own loss and accelerate's fp32 copy of the outputs follow
     * the transformers version (any release from 4.49 runs the same loss) */
    {GM_STACK_HF, EST_SET_TRANSFORMERS_VERSION, 0, 0, NULL,
     "an HF model's code, @V its transformers release"},
    {GM_STACK_HF_TRAINER, EST_SET_TRANSFORMERS_VERSION, 0, 0, NULL,
     "transformers Trainer, @V its version: ForCausalLMLoss, fp32 outputs"},
    {GM_STACK_ACCELERATE, EST_SET_TRANSFORMERS_VERSION, 0, 0, "4.57",
     "an HF model under accelerator.prepare: outputs to fp32 (operations.py, v1.0.1)"},
    /* accelerate's FullyShardedDataParallelPlugin.__post_init__ without an accelerate config
     * (its questionnaire, commands/config/cluster.py, offers FSDP2 and the broadcast) */
    {GM_STACK_ACCELERATE, EST_SET_FSDP_VERSION, 0, 0, "1",
     ACC "utils/dataclasses.py: FSDP_VERSION default 1, FULL_SHARD, v1.6.0 to v1.14.0"},
    {GM_STACK_ACCELERATE, EST_SET_NO_SYNC_MODULE_STATES, 0, 0, "true",
     ACC "utils/dataclasses.py: FSDP1 sync_module_states default False, v0.34.0 to v1.14.0"},
    /* axolotl's config schema (src/axolotl/utils/schemas/), v0.8.0 3877c5c to v0.18.0
     * 2f5cb9d; sample_packing is off (None) by default, so the batch stays --batch x --seq */
    {GM_STACK_AXOLOTL, EST_SET_TRANSFORMERS_VERSION, 0, 0, "4.57",
     "axolotl trains through the transformers Trainer"},
    {GM_STACK_AXOLOTL, EST_SET_PRECISION, 0, 0, "bf16-mixed",
     AXO "config.py bf16: 'auto' (Trainer bf16 autocast where the GPU has it)"},
    {GM_STACK_AXOLOTL, EST_SET_OPTIMIZER, 0, 0, "adamw",
     AXO "training.py optimizer: adamw_torch_fused"},
    {GM_STACK_AXOLOTL, EST_SET_OPTIMIZER_IMPL, 0, 0, "fused",
     AXO "training.py optimizer: adamw_torch_fused"},
    {GM_STACK_AXOLOTL, EST_SET_GRAD_CHECKPOINTING, 0, 0, "none",
     AXO "config.py gradient_checkpointing: False"},
    {GM_STACK_AXOLOTL, EST_SET_ATTENTION, 0, 0, "sdpa",
     AXO "config.py flash_attention / attn_implementation: None (transformers' sdpa)"},
    {GM_STACK_AXOLOTL, EST_SET_LOSS, 0, 0, "full",
     AXO "config.py plugins: None (no Liger): the model's ForCausalLMLoss"},
    /* unsloth (unslothai/unsloth 015bdef, unslothai/unsloth-zoo ce232d6) */
    {GM_STACK_UNSLOTH, EST_SET_TRANSFORMERS_VERSION, 0, 0, "4.57",
     "unsloth trains through TRL's SFTTrainer, a transformers Trainer"},
    {GM_STACK_UNSLOTH, EST_SET_GRAD_CHECKPOINTING, 0, 0, "full",
     UNS "llama.py get_peft_model: use_gradient_checkpointing='unsloth'"},
    {GM_STACK_UNSLOTH, EST_SET_ACTIVATION_OFFLOAD, 0, 0, "true",
     "unsloth-zoo ce232d6 UnslothCheckpointFunction: layer inputs to pinned host buffers"},
    {GM_STACK_UNSLOTH, EST_SET_LOSS, 0, 0, "fused-linear",
     UNS "llama.py: unsloth_fused_ce_loss unless UNSLOTH_RETURN_LOGITS=1"},
    {GM_STACK_UNSLOTH, EST_SET_LOSS_IMPL, 0, 0, "unsloth",
     "unsloth-zoo ce232d6 fused_losses get_chunk_size: chunks of <= 4 GiB fp32 logits"},
    {GM_STACK_UNSLOTH, EST_SET_LORA_TARGETS, 0, 0, "all-linear",
     UNS "llama.py get_peft_model: q,k,v,o,gate,up,down_proj"},
    {GM_STACK_UNSLOTH, EST_SET_LORA_DROPOUT, 0, 0, "0",
     UNS "llama.py get_peft_model: lora_dropout 0"},
    /* LitGPT on Lightning Fabric */
    {GM_STACK_LIGHTNING, EST_SET_PRECISION, 0, 0, "bf16",
     "Lightning-AI/litgpt 29ece59 config_hub/finetune/*/full.yaml: precision bf16-true"},
    {GM_STACK_LIGHTNING, EST_SET_MODEL_IMPL, 0, 0, "litgpt",
     "Lightning-AI/litgpt 04205815 litgpt/model.py: its own GPT, F.gelu in GptNeoxMLP"},
    {GM_STACK_LIGHTNING, EST_SET_FSDP_VERSION, 0, 0, "1",
     "Lightning-AI/litgpt 29ece59 finetune/full.py: FSDPStrategy, wrap per Block"},
};

#undef V

static bool row_holds(const struct stack_row *r, uint32_t version)
{
    uint32_t v = version ? version : UINT32_MAX;
    return v >= r->from && (!r->until || v < r->until);
}

/* torchtitan's ScaledDotProductAttention puts SDPBackend.CUDNN_ATTENTION first where
 * has_cuda_capability(10, 0) (models/attention.py _init_backend, from 3b85aa31f "Use cudnn
 * backend on B200", May 2025; read at 775a486 and 6fc499f), while op-level SAC's _save_list
 * names only the flash and efficient SDPA ops (llama3 parallelize.py at 775a486 and 6fc499f)
 * until b39377f9f "add all SDPA backends to op_sac_save_list" (December 2025, issue #2091:
 * the attention was recomputed in backward).  The releases between: v0.1.0 (June 2025) and
 * v0.2.0 (October 2025); v0.2.1 has the fix.  The policy marks every op outside the list
 * PREFER_RECOMPUTE, so the attention's output and statistics are not kept. */
bool est_titan_sac_recomputes_attention(const struct gm_job *job)
{
    uint32_t v = job->stack.preset_version;
    return job->mode == GM_EST_TRAIN && job->stack.preset == GM_STACK_TORCHTITAN &&
           job->memory.checkpointing == GM_CKPT_OP && job->gpu.sm >= 100 &&
           v >= GM_VERSION(0, 1, 0) && v < GM_VERSION(0, 2, 1);
}

/* The value a row sets: its text, or the preset's version for a row valued NULL. */
static const char *row_value(const struct stack_row *r, const char *version_text)
{
    if (r->value)
        return r->value;
    return version_text ? version_text : stacks[r->stack].version_default;
}

/* The value a row set in 'job', as text (the preset's version printed back). */
static const char *row_value_of(const struct gm_job *job, const struct stack_row *r, char *b,
                                size_t n)
{
    uint32_t v = job->stack.preset_version;
    if (r->value || !v)
        return row_value(r, NULL);
    return est_version_text(v, b, n);
}

enum gm_status est_stack_apply(struct gm_job *job, const char *spec, struct gm_error *err)
{
    char name[32], list[256] = "";
    const char *at = strchr(spec, '@'), *version_text = at ? at + 1 : NULL;
    size_t n = at ? (size_t)(at - spec) : strlen(spec);
    enum gm_stack_preset p = GM_STACK_NONE;
    uint32_t version = 0;
    enum gm_status st;

    if (n < sizeof name) {
        memcpy(name, spec, n);
        name[n] = '\0';
        for (int i = 1; i < GM_STACK__COUNT; i++)
            if (!strcmp(stacks[i].name, name))
                p = (enum gm_stack_preset)i;
    }
    if (p == GM_STACK_NONE) {
        for (int i = 1; i < GM_STACK__COUNT; i++)
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i > 1 ? ", " : "",
                     stacks[i].name);
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "--stack: '%.*s' is not one of: %s",
                       (int)(n < 64 ? n : 64), spec, list);
    }
    if (version_text && !(version = est_parse_version_or_zero("stack", version_text, err)))
        return GM_ERR_INVALID;
    job->stack.preset = p;
    job->stack.preset_version = version;
    job->stack.framework = stacks[p].family;
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        const struct stack_row *r = &rows[i];
        if (r->stack != p || !row_holds(r, version) || !row_value(r, version_text))
            continue; /* a row valued by the version, without one */
        st = est_job_preset(job, r->id, row_value(r, version_text), err);
        if (st != GM_OK)
            return gm_error_prefix(err, "--stack %s", stacks[p].name);
    }
    return GM_OK;
}

/* Whether the setting bears on this job: the FSDP version only when it shards with FSDP,
 * the checkpointing period only with full checkpointing, LoRA's settings only with adapters,
 * the fused loss's kernel only with that loss, the fp32 upcast only with QLoRA. */
static bool bears(const struct gm_job *job, enum est_setting id)
{
    if (id == EST_SET_FSDP_VERSION || id == EST_SET_FSDP_SHARD_ENDS)
        return job->parallel.shard == GM_SHARD_FSDP;
    if (id == EST_SET_NO_SYNC_MODULE_STATES)
        return job->parallel.shard == GM_SHARD_FSDP && job->parallel.fsdp_version == 1;
    if (id == EST_SET_CHECKPOINT_EVERY || id == EST_SET_ACTIVATION_OFFLOAD)
        return job->memory.checkpointing == GM_CKPT_FULL;
    if (id == EST_SET_LORA_TARGETS || id == EST_SET_LORA_DROPOUT)
        return job->memory.adapter != GM_ADAPTER_NONE;
    if (id == EST_SET_LOSS_IMPL)
        return job->memory.loss == GM_LOSS_FUSED_LINEAR;
    if (id == EST_SET_NO_FP32_UPCAST) /* the upcast is QLoRA's (prepare_model_for_kbit_training) */
        return job->memory.adapter == GM_ADAPTER_QLORA;
    return true;
}

/* The rows of the job's preset still in force, in table order; calls 'fn' for each. */
static void each_row_in_force(const struct gm_job *job,
                              void (*fn)(void *ctx, const struct stack_row *r), void *ctx)
{
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        const struct stack_row *r = &rows[i];
        if (r->stack == job->stack.preset && row_holds(r, job->stack.preset_version) &&
            est_preset_set(job, r->id) && bears(job, r->id))
            fn(ctx, r);
    }
}

static void assume_row(void *ctx, const struct stack_row *r)
{
    struct est_ctx *cx = ctx;
    char b[32];
    est_assume(cx->e, "--stack %s: --%s %s (%s)", stacks[r->stack].name, est_setting(r->id)->name,
               row_value_of(cx->job, r, b, sizeof b), r->source);
}

void est_stack_assume(struct est_ctx *cx)
{
    each_row_in_force(cx->job, assume_row, cx);
}

struct json_ctx {
    struct gm_json *w;
    const struct gm_job *job;
};

static void json_row(void *ctx, const struct stack_row *r)
{
    struct json_ctx *c = ctx;
    struct gm_json *w = c->w;
    char b[32];
    gm_json_begin_object(w);
    gm_json_kv_str(w, "setting", est_setting(r->id)->name);
    gm_json_kv_str(w, "value", row_value_of(c->job, r, b, sizeof b));
    gm_json_kv_str(w, "source", r->source);
    gm_json_end_object(w);
}

const char *est_stack_name(const struct gm_job *job)
{
    unsigned p = (unsigned)job->stack.preset;
    return p < GM_STACK__COUNT && stacks[p].name ? stacks[p].name : "hf";
}

bool est_stack_async_tp(const struct gm_job *job)
{
    unsigned p = (unsigned)job->stack.preset;
    return p < GM_STACK__COUNT && stacks[p].async_tp;
}

void est_stack_json(struct gm_json *w, const struct gm_job *job)
{
    struct json_ctx c = {w, job};
    gm_json_kv_str(w, "stack", est_stack_name(job));
    gm_json_key(w, "stack_preset");
    gm_json_begin_array(w);
    each_row_in_force(job, json_row, &c);
    gm_json_end_array(w);
}
