/* SPDX-License-Identifier: MIT */
/* estimate_json.c - the gpumem.estimate/1 document of a report: what `gpumem estimate
 * --json` prints and what a binding returns, written in one place.  Reads its input only.
 *
 * Keys in this order: schema, gpumem_version, inputs (the job as given), model,
 * parameters, weights_bytes, components (inside the caching allocator, each with its
 * kind), phases, peak, overheads (outside the allocator, by kind), activations_per_token
 * (blog method), assumptions, fit (with a GPU) or fits_on, suggestions; then, when they
 * apply, model_file, setup, devices, paged_optimizer, lora, serving (vLLM, SGLang,
 * llama.cpp), search (with the limit that binds), deepspeed, plan (a serving job that fits:
 * the engine's command line and its budget rows). */
#include "estimate/estimate_int.h"

#include "gpumem/json.h"
#include "gpumem/version.h"

#include <stdio.h>

static const char *mode_name(enum gm_est_mode m)
{
    return m == GM_EST_TRAIN ? "train" : m == GM_EST_INFER ? "infer" : "weights";
}

static const char *choice_name(const char *setting, int index)
{
    const struct gm_job_setting *s = gm_job_setting_find(setting);
    const char *const *c = s ? s->choices : NULL;
    for (int i = 0; c && c[i]; i++)
        if ((s->values ? s->values[i] : i) == index)
            return c[i];
    return "unknown";
}

static void json_version(struct gm_json *w, const char *key, uint32_t v)
{
    char b[16];
    if (!v) {
        gm_json_kv_str(w, key, "current");
        return;
    }
    gm_json_kv_str(w, key, est_version_text(v, b, sizeof b));
}

/* The memory techniques and the runtime around the tensors, as given. */
static void json_inputs_techniques(struct gm_json *w, const struct gm_job *j)
{
    const struct gm_job_memory *mem = &j->memory;
    if (j->mode == GM_EST_TRAIN) {
        gm_json_kv_str(w, "loss", choice_name("loss", (int)mem->loss));
        gm_json_kv_u64(w, "loss_chunks", mem->loss_chunks);
        if (mem->loss == GM_LOSS_FUSED && mem->loss_impl == GM_LOSS_IMPL_UNSLOTH)
            gm_json_kv_bool(w, "loss_cache_block", mem->loss_cache_block);
        gm_json_kv_u64(w, "checkpoint_every", mem->checkpoint_every);
        gm_json_kv_bool(w, "optimizer_in_backward", mem->optimizer_in_backward);
        gm_json_kv_bool(w, "activation_offload", mem->activation_offload);
        gm_json_key(w, "fused_kernels");
        gm_json_begin_array(w);
        if (mem->fused_kernels & GM_FUSED_RMS_NORM)
            gm_json_str(w, "rms_norm");
        if (mem->fused_kernels & GM_FUSED_SWIGLU)
            gm_json_str(w, "swiglu");
        if (mem->fused_kernels & GM_FUSED_ROPE)
            gm_json_str(w, "rope");
        if (mem->fused_kernels & GM_FUSED_LORA)
            gm_json_str(w, "lora");
        gm_json_end_array(w);
        gm_json_kv_bool(w, "compile", mem->compile);
        if (mem->float8) /* only when asked: older readers see the inputs they know */
            gm_json_kv_bool(w, "float8", true);
        if (j->workload.tokens)
            gm_json_kv_u64(w, "tokens_per_batch", j->workload.tokens);
        else
            gm_json_kv_null(w, "tokens_per_batch");
        gm_json_kv_u64(w, "fsdp_version", j->parallel.fsdp_version);
        gm_json_kv_bool(w, "reshard_after_forward", j->parallel.reshard_after_forward);
        gm_json_kv_bool(w, "sync_module_states", j->parallel.sync_module_states);
        gm_json_kv_u64(w, "ep", j->parallel.ep);
        gm_json_kv_u64(w, "cp", j->parallel.cp);
        gm_json_kv_u64(w, "bucket_elements", j->parallel.bucket_elements);
        gm_json_kv_bool(w, "zero_overlap_comm", j->parallel.zero_overlap_comm);
        gm_json_kv_u64(w, "zero_reuse_distance", j->parallel.zero_reuse_distance);
        json_version(w, "transformers_version", j->stack.transformers);
        json_version(w, "bitsandbytes_version", j->stack.bitsandbytes);
        if (j->stack.trl) /* null: no TRL (--trl-version's default), not its current release */
            json_version(w, "trl_version", j->stack.trl);
        else
            gm_json_kv_null(w, "trl_version");
        gm_json_kv_str(w, "loss_impl", choice_name("loss-impl", (int)mem->loss_impl));
        gm_json_kv_str(w, "model_impl", choice_name("model-impl", (int)j->stack.model_impl));
    }
    if (j->mode != GM_EST_WEIGHTS) /* --stack: training and generate() take its defaults */
        est_stack_json(w, j);
    /* null: NCCL's rule (stage_runtime.c), no figure per communicator */
    if (est_given(j, EST_SET_NCCL))
        gm_json_kv_u64(w, "nccl_bytes_per_communicator", j->runtime.nccl_bytes);
    else
        gm_json_kv_null(w, "nccl_bytes_per_communicator");
    json_version(w, "cuda_version", j->stack.cuda);
    json_version(w, "torch_version", j->stack.torch);
    if (j->mode == GM_EST_INFER && j->engine.kind == GM_ENGINE_VLLM)
        json_version(w, "vllm_version", j->stack.vllm);
}

static void json_inputs(struct gm_json *w, const struct gm_estimate_report *r)
{
    const struct gm_job *j = &r->job;
    const struct gm_estimate *e = r->est;
    const struct gm_model *m = j->model.model;
    gm_json_key(w, "inputs");
    gm_json_begin_object(w);
    gm_json_kv_str(w, "mode", mode_name(j->mode));
    gm_json_kv_str(w, "method", choice_name("method", (int)j->method));
    if (m)
        gm_json_kv_str(w, "model", m->name);
    else
        gm_json_kv_null(w, "model");
    if (j->model.n_params)
        gm_json_kv_u64(w, "parameters", j->model.n_params);
    else
        gm_json_kv_null(w, "parameters");
    if (j->numerics.weight_format == GM_WEIGHTS_BITS)
        gm_json_kv_double(w, "bits", j->numerics.weight_bits);
    else
        gm_json_kv_null(w, "bits");
    /* ---- weight formats (bitsandbytes, GPTQ, AWQ, FP8) ---- */
    if (j->numerics.weight_format == GM_WEIGHTS_QUANT)
        gm_json_kv_str(w, "quant", est_quant_setting_name(&j->numerics.quant));
    gm_json_kv_u64(w, "reserve_bytes", j->runtime.reserve_bytes);
    if (j->mode == GM_EST_TRAIN) {
        gm_json_kv_str(w, "precision", gm_precision_name(j->numerics.precision));
        gm_json_kv_str(w, "optimizer", gm_optimizer_name(j->numerics.optimizer));
        gm_json_kv_str(w, "optimizer_impl", choice_name("optimizer-impl", j->numerics.optim_impl));
        gm_json_kv_u64(w, "batch", j->workload.batch);
        gm_json_kv_u64(w, "seq", j->workload.seq);
        gm_json_kv_str(w, "grad_checkpointing",
                       choice_name("grad-checkpointing", j->memory.checkpointing));
        gm_json_kv_str(w, "attention", choice_name("attention", j->memory.attention));
        gm_json_kv_str(w, "zero_grad", choice_name("zero-grad", j->numerics.zero_grad));
        if (j->numerics.activations_per_token > 0)
            gm_json_kv_double(w, "activations_per_token", j->numerics.activations_per_token);
        else
            gm_json_kv_null(w, "activations_per_token");
    }
    if (j->mode == GM_EST_INFER) {
        gm_json_kv_u64(w, "batch", j->workload.batch);
        gm_json_kv_u64(w, "context", j->workload.context);
        gm_json_kv_u64(w, "new_tokens", j->workload.new_tokens);
        gm_json_kv_str(w, "kv_dtype",
                       j->numerics.kv_dtype == GM_DTYPE_UNKNOWN
                           ? "auto"
                           : gm_dtype_name(j->numerics.kv_dtype));
        gm_json_kv_str(w, "attention", choice_name("attention", j->memory.attention));
        gm_json_kv_bool(w, "full_logits", j->workload.full_logits);
        gm_json_kv_str(w, "quant_kernel", gm_quant_kernel_name(j->numerics.quant_kernel));
    }
    /* the context the estimate used (est_cuda_context()), where it comes from, and the SMs
     * it follows where it does */
    gm_json_kv_u64(w, "cuda_context_bytes", e->context.bytes);
    gm_json_kv_str(w, "cuda_context_source", gm_est_context_source_name(e->context.source));
    if (e->context.sms) {
        gm_json_kv_u64(w, "gpu_sms", e->context.sms);
        gm_json_kv_u64(w, "gpu_max_threads_per_sm", e->context.threads_per_sm);
    }
    gm_json_kv_u64(w, "workspace_bytes", j->runtime.workspace_bytes);
    gm_json_kv_double(w, "fragmentation", j->runtime.fragmentation);
    if (j->gpu.memory_bytes)
        gm_json_kv_str(w, "gpu", j->gpu.label);
    else
        gm_json_kv_null(w, "gpu");
    gm_json_kv_u64(w, "gpu_memory_bytes", j->gpu.memory_bytes);
    json_inputs_techniques(w, j);
    gm_json_end_object(w);
}

static void json_model(struct gm_json *w, const struct gm_model *m)
{
    gm_json_key(w, "model");
    if (!m) {
        gm_json_null(w);
        return;
    }
    gm_json_begin_object(w);
    gm_json_kv_str(w, "name", m->name);
    gm_json_kv_str(w, "model_type", m->model_type);
    gm_json_kv_str(w, "arch", gm_arch_name(m->arch));
    gm_json_kv_u64(w, "hidden_size", m->hidden);
    gm_json_kv_u64(w, "num_hidden_layers", m->n_layers);
    gm_json_kv_u64(w, "num_attention_heads", m->n_heads);
    gm_json_kv_u64(w, "num_key_value_heads", m->n_kv_heads);
    gm_json_kv_u64(w, "head_dim", m->head_dim);
    gm_json_kv_u64(w, "intermediate_size", m->intermediate);
    gm_json_kv_u64(w, "vocab_size", m->vocab);
    gm_json_kv_bool(w, "tie_word_embeddings", m->tied_embeddings);
    gm_json_kv_u64(w, "sliding_window", m->sliding_window);
    gm_json_kv_u64(w, "num_experts", m->n_experts);
    gm_json_kv_u64(w, "num_experts_per_tok", m->n_experts_active);
    /* ---- architectures and weight formats: keys only where they apply ---- */
    if (m->head != GM_HEAD_CAUSAL_LM)
        gm_json_kv_str(w, "head", m->head == GM_HEAD_ENCODER ? "encoder" : "encoder_decoder");
    if (m->n_decoder_layers)
        gm_json_kv_u64(w, "num_decoder_layers", m->n_decoder_layers);
    if (m->kv_lora_rank) {
        gm_json_kv_u64(w, "kv_lora_rank", m->kv_lora_rank);
        gm_json_kv_u64(w, "qk_rope_head_dim", m->qk_rope_head_dim);
    }
    if (m->n_shared_experts || m->shared_intermediate)
        gm_json_kv_u64(w, "shared_expert_width",
                       m->shared_intermediate ? m->shared_intermediate
                                              : m->n_shared_experts * m->moe_intermediate);
    if (m->n_dense_layers && m->n_experts)
        gm_json_kv_u64(w, "dense_layers", m->n_dense_layers);
    if (m->quant.method != GM_QUANT_NONE && m->quant.method != GM_QUANT_GGUF)
        gm_json_kv_str(w, "quantization", gm_quant_method_name(m->quant.method));
    if (m->generic)
        gm_json_kv_bool(w, "generic_layout", true);
    if (m->rope_scaling != GM_ROPE_NONE) {
        gm_json_kv_u64(w, "max_position_embeddings", m->max_positions);
        gm_json_key(w, "rope_scaling");
        gm_json_begin_object(w);
        gm_json_kv_str(w, "rope_type", gm_rope_scaling_name(m->rope_scaling));
        if (m->rope_factor > 0)
            gm_json_kv_double(w, "factor", m->rope_factor);
        else
            gm_json_kv_null(w, "factor");
        if (m->rope_original_positions)
            gm_json_kv_u64(w, "original_max_position_embeddings", m->rope_original_positions);
        else
            gm_json_kv_null(w, "original_max_position_embeddings");
        gm_json_end_object(w);
    }
    gm_json_end_object(w);
}

static const char *peak_phase_name(const struct gm_estimate *e)
{
    return e->mode == GM_EST_WEIGHTS ? "weights" : gm_est_phase_name(e->peak_phase);
}

/* The low and high ends of the figures and the assumptions that spread them. */
static void json_range(struct gm_json *w, const struct gm_est_range *r)
{
    gm_json_key(w, "range");
    gm_json_begin_object(w);
    gm_json_kv_u64(w, "allocated_low_bytes", r->allocated_bytes[0]);
    gm_json_kv_u64(w, "allocated_high_bytes", r->allocated_bytes[1]);
    gm_json_kv_u64(w, "reserved_low_bytes", r->reserved_bytes[0]);
    gm_json_kv_u64(w, "reserved_high_bytes", r->reserved_bytes[1]);
    gm_json_kv_u64(w, "device_low_bytes", r->device_bytes[0]);
    gm_json_kv_u64(w, "device_high_bytes", r->device_bytes[1]);
    gm_json_key(w, "sources");
    gm_json_begin_array(w);
    for (unsigned f = 1; f & GM_UNCERTAIN__ALL; f <<= 1)
        if (r->sources & f)
            gm_json_str(w, gm_est_uncertainty_name(f));
    gm_json_end_array(w);
    gm_json_end_object(w);
}

static void json_estimate(struct gm_json *w, const struct gm_estimate *e)
{
    gm_json_kv_u64(w, "parameters", e->n_params);
    gm_json_kv_u64(w, "weights_bytes", e->weight_bytes);
    gm_json_key(w, "components");
    gm_json_begin_array(w);
    for (size_t i = 0; i < e->n_components; i++) {
        const struct gm_est_component *c = &e->components[i];
        if (gm_est_kind_outside_allocator(c->kind))
            continue;
        gm_json_begin_object(w);
        gm_json_kv_str(w, "name", c->name);
        gm_json_kv_str(w, "kind", gm_est_kind_name(c->kind));
        gm_json_kv_u64(w, "bytes", c->bytes);
        gm_json_kv_str(w, "phase", gm_est_phases_name(c->phases));
        gm_json_kv_bool(w, "transient", c->transient);
        gm_json_kv_str(w, "note", c->note);
        gm_json_end_object(w);
    }
    gm_json_end_array(w);
    gm_json_key(w, "phases");
    gm_json_begin_object(w);
    if (e->mode == GM_EST_TRAIN) {
        gm_json_kv_u64(w, "forward_backward_bytes", e->forward_backward_bytes);
        gm_json_kv_u64(w, "optimizer_step_bytes", e->optimizer_step_bytes);
        gm_json_kv_u64(w, "backward_start_bytes", e->backward_start_bytes);
        gm_json_kv_u64(w, "backward_end_bytes", e->backward_end_bytes);
        gm_json_kv_u64(w, "loss_bytes", e->loss_bytes);
        gm_json_kv_u64(w, "loss_tokens", e->loss_tokens);
        gm_json_kv_u64(w, "loss_vocab", e->loss_vocab);
    } else if (e->mode == GM_EST_INFER) {
        gm_json_kv_u64(w, "prefill_bytes", e->prefill_bytes);
        gm_json_kv_u64(w, "decode_bytes", e->decode_bytes);
    }
    gm_json_end_object(w);
    gm_json_key(w, "peak");
    gm_json_begin_object(w);
    gm_json_kv_u64(w, "allocated_bytes", e->peak_allocated_bytes);
    gm_json_kv_u64(w, "reserved_bytes", e->peak_reserved_bytes);
    gm_json_kv_u64(w, "device_bytes", e->device_bytes);
    gm_json_kv_str(w, "phase", peak_phase_name(e));
    gm_json_end_object(w);
    json_range(w, &e->range);
    if (e->replay.used) {
        const struct gm_est_replay *r = &e->replay;
        gm_json_key(w, "replay");
        gm_json_begin_object(w);
        gm_json_kv_u64(w, "steps", r->steps);
        gm_json_kv_u64(w, "mallocs", r->mallocs);
        gm_json_kv_u64(w, "requested_peak_bytes", r->requested_peak);
        gm_json_kv_u64(w, "allocated_peak_bytes", r->allocated_peak);
        gm_json_kv_u64(w, "reserved_peak_bytes", r->reserved_peak);
        gm_json_kv_u64(w, "capacity_bytes", r->capacity_bytes);
        gm_json_kv_u64(w, "segments", r->segments);
        gm_json_kv_u64(w, "oom_retries", r->retries);
        gm_json_kv_bool(w, "oom", r->oom);
        gm_json_kv_bool(w, "floor_decides", r->floor);
        gm_json_kv_bool(w, "expandable_segments", r->expandable);
        if (r->loss_cache_block || r->loss_cache_no_room) {
            /* --loss fused: a measured allowance, not a mechanism read in code */
            gm_json_key(w, "loss_cache_block");
            gm_json_begin_object(w);
            gm_json_kv_u64(w, "bytes", r->loss_cache_block);
            gm_json_kv_bool(w, "no_room", r->loss_cache_no_room);
            gm_json_kv_str(w, "basis", "measured");
            gm_json_kv_str(w, "fit_on", EST_LOSS_CACHE_BLOCK_FIT_ON);
            gm_json_end_object(w);
        }
        if (r->at_capacity) {
            gm_json_kv_bool(w, "at_capacity", true);
            gm_json_kv_u64(w, "floor_bytes", r->floor_bytes);
        }
        if (r->oom && r->failed.request) {
            gm_json_key(w, "failed");
            gm_json_begin_object(w);
            gm_json_kv_u64(w, "request_bytes", r->failed.request);
            gm_json_kv_u64(w, "live_bytes", r->failed.live);
            gm_json_kv_str(w, "tensor",
                           r->failed.kind == GM_KIND__COUNT ? "temporary"
                                                            : gm_est_kind_name(r->failed.kind));
            gm_json_kv_u64(w, "step", r->failed.step + 1);
            gm_json_kv_str(w, "at", gm_est_replay_at_name(r->failed.at));
            gm_json_kv_u64(w, "layer", r->failed.layer);
            gm_json_kv_str(w, "stream", gm_est_stream_name(r->failed.stream));
            gm_json_kv_u64(w, "reserved_bytes", r->failed.reserved);
            gm_json_kv_u64(w, "allocated_bytes", r->failed.allocated);
            gm_json_kv_u64(w, "largest_free_block_bytes", r->failed.largest_free);
            gm_json_kv_bool(w, "fragmentation", est_replay_failed_on_layout(r));
            gm_json_kv_u64(w, "largest_free_segment_bytes", r->failed.segment);
            gm_json_kv_u64(w, "largest_free_segment_live_bytes", r->failed.segment_live);
            if (r->failed.pin_kind != GM_KIND__COUNT) {
                gm_json_kv_str(w, "largest_free_segment_holder",
                               gm_est_kind_name(r->failed.pin_kind));
                gm_json_kv_u64(w, "largest_free_segment_holder_bytes", r->failed.pin_bytes);
                gm_json_kv_u64(w, "largest_free_segment_holder_layer", r->failed.pin_layer);
            }
            gm_json_end_object(w);
        }
        gm_json_key(w, "reserved_by_stream_bytes");
        gm_json_begin_object(w);
        for (unsigned k = 0; k < GM_EST_STREAM__COUNT; k++)
            gm_json_kv_u64(w, gm_est_stream_name((enum gm_est_stream)k), r->stream_reserved[k]);
        gm_json_end_object(w);
        gm_json_key(w, "live_peak_by_stream_bytes");
        gm_json_begin_object(w);
        for (unsigned k = 0; k < GM_EST_STREAM__COUNT; k++)
            gm_json_kv_u64(w, gm_est_stream_name((enum gm_est_stream)k), r->stream_live_peak[k]);
        gm_json_end_object(w);
        gm_json_end_object(w);
    }
    /* every kind outside the allocator, "<kind>_bytes", in the kinds' order */
    gm_json_key(w, "overheads");
    gm_json_begin_object(w);
    for (unsigned k = 0; k < GM_KIND__COUNT; k++) {
        char key[64];
        if (!gm_est_kind_outside_allocator((enum gm_est_kind)k))
            continue;
        snprintf(key, sizeof key, "%s_bytes", gm_est_kind_name((enum gm_est_kind)k));
        gm_json_kv_u64(w, key, gm_estimate_kind_bytes(e, (enum gm_est_kind)k));
    }
    gm_json_end_object(w);
}

static const char *cost_name(enum gm_sugg_cost c)
{
    static const char *const names[] = {"none",    "speed",    "numerics",
                                        "quality", "workload", "hardware"};
    return (unsigned)c < sizeof names / sizeof names[0] ? names[c] : "unknown";
}

static void json_fit(struct gm_json *w, const struct gm_estimate_report *r)
{
    const struct gm_estimate *e = r->est;
    const struct gm_est_fit *f = &e->fit;
    if (r->job.gpu.memory_bytes) {
        gm_json_key(w, "fit");
        gm_json_begin_object(w);
        gm_json_kv_str(w, "gpu", r->job.gpu.label);
        gm_json_kv_u64(w, "capacity_bytes", f->capacity_bytes);
        gm_json_kv_bool(w, "fits", f->fits);
        gm_json_kv_str(w, "reason", gm_fit_reason_name(f->reason));
        gm_json_kv_str(w, "message", f->text);
        gm_json_kv_i64(w, "headroom_bytes", f->headroom_bytes);
        gm_json_kv_u64(w, "shortfall_bytes", f->shortfall_bytes);
        gm_json_kv_str(w, "verdict", gm_fit_verdict_name(f->verdict));
        gm_json_kv_i64(w, "headroom_low_bytes", f->headroom_low_bytes);
        gm_json_kv_i64(w, "headroom_high_bytes", f->headroom_high_bytes);
        gm_json_kv_str(w, "range_message", f->range_text);
        gm_json_key(w, "devices");
        gm_json_begin_array(w);
        for (size_t i = 0; i < e->layout.n_groups; i++) {
            gm_json_begin_object(w);
            gm_json_kv_str(w, "role", e->layout.groups[i].role);
            gm_json_kv_u64(w, "first_rank", e->layout.groups[i].first_rank);
            gm_json_kv_u64(w, "count", e->layout.groups[i].count);
            gm_json_kv_u64(w, "device_bytes", e->layout.groups[i].device_bytes);
            gm_json_kv_bool(w, "fits", f->group_fits[i]);
            gm_json_end_object(w);
        }
        gm_json_end_array(w);
        if (!f->fits)
            gm_json_kv_bool(w, "nothing_fits", r->suggestions.none_fits);
        gm_json_end_object(w);
    } else {
        gm_json_key(w, "fits_on");
        gm_json_begin_array(w);
        for (size_t i = 0; i < r->n_fits_on; i++)
            gm_json_str(w, gm_gpu_catalog_get(r->fits_on[i])->name);
        gm_json_end_array(w);
    }
    gm_json_key(w, "suggestions");
    gm_json_begin_array(w);
    for (size_t i = 0; i < r->suggestions.n; i++) {
        const struct gm_est_suggestion *s = &r->suggestions.items[i];
        gm_json_begin_object(w);
        gm_json_kv_str(w, "change", s->change);
        gm_json_kv_u64(w, "device_bytes", s->device_bytes);
        gm_json_kv_bool(w, "fits", s->fits);
        if (s->reason == GM_FIT_FITS_PAGED)
            gm_json_kv_u64(w, "paged_bytes", s->paged_bytes);
        gm_json_kv_str(w, "cost", cost_name(s->cost));
        gm_json_kv_str(w, "trade", s->trade);
        gm_json_kv_bool(w, "combined", s->combined);
        gm_json_end_object(w);
    }
    gm_json_end_array(w);
}

static void json_model_file(struct gm_json *w, const struct gm_modelfile *f)
{
    gm_json_key(w, "model_file");
    gm_json_begin_object(w);
    gm_json_kv_str(w, "format", f->format == GM_MODELFILE_GGUF ? "gguf" : "safetensors");
    if (f->format == GM_MODELFILE_GGUF)
        gm_json_kv_u64(w, "gguf_version", f->gguf_version);
    gm_json_kv_u64(w, "files", f->n_files);
    gm_json_kv_u64(w, "tensors", f->n_tensors);
    gm_json_kv_u64(w, "parameters", f->n_params);
    gm_json_kv_u64(w, "bytes", f->n_bytes);
    gm_json_kv_u64(w, "header_bytes", f->header_bytes);
    gm_json_key(w, "dtypes");
    gm_json_begin_array(w);
    for (size_t i = 0; i < f->n_dtypes; i++) {
        gm_json_begin_object(w);
        gm_json_kv_str(w, "dtype", f->dtypes[i].name);
        gm_json_kv_u64(w, "tensors", f->dtypes[i].n_tensors);
        gm_json_kv_u64(w, "elements", f->dtypes[i].n_elements);
        gm_json_kv_u64(w, "bytes", f->dtypes[i].n_bytes);
        gm_json_end_object(w);
    }
    gm_json_end_array(w);
    gm_json_kv_str(w, "largest_module", f->largest_module);
    gm_json_kv_u64(w, "largest_module_parameters", f->largest_module_params);
    gm_json_end_object(w);
}

/* Whether the job goes beyond one GPU, full training and plain generation. */
static bool extended(const struct gm_estimate_report *r)
{
    const struct gm_job *j = &r->job;
    return j->memory.adapter != GM_ADAPTER_NONE || j->parallel.shard != GM_SHARD_NONE ||
           j->parallel.offload_optimizer || j->parallel.offload_params ||
           j->parallel.sequence_parallel || j->parallel.async_tp || j->memory.paged_optimizer ||
           r->searched || j->parallel.gpus > 1 || j->parallel.tp > 1 || j->parallel.pp > 1 ||
           j->engine.kind != GM_ENGINE_NONE || j->workload.grad_accum > 1 ||
           j->memory.checkpointing == GM_CKPT_SELECTIVE || r->has_deepspeed;
}

static void json_layout(struct gm_json *w, const struct gm_estimate_report *r)
{
    const struct gm_job *j = &r->job;
    const struct gm_est_layout *l = &r->est->layout;
    gm_json_key(w, "setup");
    gm_json_begin_object(w);
    gm_json_kv_str(w, "lora",
                   j->memory.adapter == GM_ADAPTER_QLORA  ? "qlora"
                   : j->memory.adapter == GM_ADAPTER_LORA ? "lora"
                                                          : "none");
    gm_json_kv_str(w, "sharding", gm_shard_name(j->parallel.shard));
    gm_json_kv_u64(w, "gpus", j->parallel.gpus);
    gm_json_kv_u64(w, "tp", j->parallel.tp);
    gm_json_kv_u64(w, "pp", j->parallel.pp);
    gm_json_kv_u64(w, "cp", j->parallel.cp);
    gm_json_kv_bool(w, "sequence_parallel", j->parallel.sequence_parallel);
    gm_json_kv_bool(w, "async_tp", j->parallel.async_tp);
    if (j->parallel.pp > 1 && j->mode == GM_EST_TRAIN)
        gm_json_kv_str(w, "pp_schedule", gm_pp_schedule_name(j->parallel.pp_schedule));
    if (j->parallel.pp > 1 && j->mode == GM_EST_TRAIN)
        gm_json_kv_u64(w, "pp_microbatches", est_pp_microbatches(j));
    if (j->parallel.pp > 1 && j->parallel.pp_schedule == GM_PP_INTERLEAVED_1F1B)
        gm_json_kv_u64(w, "pp_stages_per_rank", j->parallel.pp_stages_per_rank);
    gm_json_kv_bool(w, "offload_optimizer", j->parallel.offload_optimizer);
    gm_json_kv_bool(w, "offload_params", j->parallel.offload_params);
    gm_json_kv_u64(w, "grad_accum", j->workload.grad_accum);
    gm_json_kv_bool(w, "selective_checkpointing", j->memory.checkpointing == GM_CKPT_SELECTIVE);
    gm_json_kv_bool(w, "paged_optimizer", j->memory.paged_optimizer);
    gm_json_kv_str(w, "engine", gm_engine_name(j->engine.kind));
    gm_json_end_object(w);
    gm_json_key(w, "devices");
    gm_json_begin_array(w);
    /* DeepSpeed's table alone (no model): gpumem made no per-device estimate */
    for (size_t i = 0; i < l->n_groups && !r->deepspeed_only; i++) {
        gm_json_begin_object(w);
        gm_json_kv_str(w, "role", l->groups[i].role);
        gm_json_kv_u64(w, "first_rank", l->groups[i].first_rank);
        gm_json_kv_u64(w, "count", l->groups[i].count);
        if (l->groups[i].layers)
            gm_json_kv_u64(w, "layers", l->groups[i].layers);
        gm_json_kv_u64(w, "allocated_bytes", l->groups[i].allocated_bytes);
        gm_json_kv_u64(w, "reserved_bytes", l->groups[i].reserved_bytes);
        gm_json_kv_u64(w, "device_bytes", l->groups[i].device_bytes);
        gm_json_kv_u64(w, "host_bytes_per_node", l->host_bytes_per_node);
        gm_json_end_object(w);
    }
    gm_json_end_array(w);
}

static void json_extras(struct gm_json *w, const struct gm_estimate_report *r)
{
    const struct gm_job *j = &r->job;
    const struct gm_estimate *e = r->est;
    const struct gm_est_serving *sv = &e->serving;
    if (j->memory.paged_optimizer) {
        gm_json_key(w, "paged_optimizer");
        gm_json_begin_object(w);
        gm_json_kv_u64(w, "pageable_bytes", e->pageable_bytes);
        if (j->gpu.memory_bytes)
            gm_json_kv_bool(w, "fits_with_paging", e->fit.fits);
        gm_json_end_object(w);
    }
    if (j->memory.adapter != GM_ADAPTER_NONE) {
        gm_json_key(w, "lora");
        gm_json_begin_object(w);
        gm_json_kv_u64(w, "rank", j->memory.lora.rank);
        gm_json_kv_double(w, "dropout", j->memory.lora.dropout);
        /* the targets (--lora-targets' short names) and those unsloth's fused functions run
         * (est_fused_lora_runs(): the replay's dropout masks and copies follow them) */
        for (int fused = 0; fused < 2; fused++) {
            gm_json_key(w, fused ? "fused_targets" : "targets");
            gm_json_begin_array(w);
            for (unsigned t = GM_LORA_Q; t <= GM_LORA_QKV; t <<= 1)
                if ((j->memory.lora.targets & t) && (!fused || est_fused_lora_runs(j, t)))
                    gm_json_str(w, est_lora_target_name(t));
            gm_json_end_array(w);
        }
        gm_json_kv_u64(w, "trainable_parameters", e->lora.trainable_params);
        gm_json_kv_u64(w, "frozen_parameters", e->lora.frozen_params);
        gm_json_kv_u64(w, "frozen_weight_bytes", e->lora.base_weight_bytes);
        gm_json_kv_u64(w, "nf4_constant_bytes", e->lora.nf4_constant_bytes);
        gm_json_end_object(w);
    }
    if (est_allocator(j) == EST_ALLOC_VLLM || est_allocator(j) == EST_ALLOC_GGML ||
        est_allocator(j) == EST_ALLOC_SGLANG) {
        gm_json_key(w, "serving");
        gm_json_begin_object(w);
        gm_json_kv_str(w, "engine", gm_engine_name(j->engine.kind));
        gm_json_kv_u64(w, "kv_bytes_per_token", sv->kv_bytes_per_token);
        if (j->engine.kind == GM_ENGINE_VLLM) {
            gm_json_kv_u64(w, "budget_bytes", sv->budget_bytes);
            gm_json_kv_u64(w, "non_torch_bytes", sv->non_torch_bytes);
            gm_json_kv_u64(w, "non_torch_logged_bytes", sv->non_torch_logged_bytes);
            gm_json_kv_u64(w, "activation_peak_bytes", sv->activation_peak_bytes);
            gm_json_kv_u64(w, "sampler_bytes", sv->sampler_bytes);
            if (sv->cuda_graph_charged_bytes)
                gm_json_kv_u64(w, "cuda_graph_charged_bytes", sv->cuda_graph_charged_bytes);
            /* only where the ranks differ (the V0 engine at tp > 1) */
            if (sv->worker_activation_peak_bytes) {
                gm_json_kv_u64(w, "worker_activation_peak_bytes", sv->worker_activation_peak_bytes);
                gm_json_kv_u64(w, "worker_kv_available_bytes", sv->worker_kv_available_bytes);
            }
            gm_json_kv_u64(w, "max_num_seqs", sv->max_num_seqs);
            gm_json_kv_u64(w, "max_num_batched_tokens", sv->max_num_batched_tokens);
            gm_json_kv_u64(w, "kv_pool_bytes", sv->kv_pool_bytes);
            gm_json_kv_u64(w, "kv_blocks", sv->kv_blocks);
            gm_json_kv_u64(w, "kv_tokens", sv->kv_tokens);
            gm_json_kv_u64(w, "kv_tokens_logged", sv->kv_tokens_logged);
            gm_json_kv_u64(w, "max_model_len", sv->max_model_len);
            gm_json_kv_str(w, "max_model_len_from", gm_max_len_from_name(sv->max_model_len_from));
            gm_json_kv_double(w, "max_concurrency", sv->max_concurrency);
            gm_json_kv_bool(w, "starts", sv->kv_tokens >= sv->max_model_len);
        } else if (j->engine.kind == GM_ENGINE_SGLANG) {
            gm_json_kv_double(w, "mem_fraction_static", sv->static_fraction);
            gm_json_kv_u64(w, "static_bytes", sv->budget_bytes);
            gm_json_kv_u64(w, "activation_peak_bytes", sv->activation_peak_bytes);
            gm_json_kv_u64(w, "kv_pool_bytes", sv->kv_pool_bytes);
            gm_json_kv_u64(w, "kv_tokens", sv->kv_tokens);
            gm_json_kv_u64(w, "context_length", sv->max_model_len);
            gm_json_kv_double(w, "max_concurrency", sv->max_concurrency);
        } else {
            gm_json_kv_u64(w, "compute_buffer_bytes", sv->compute_buffer_bytes);
        }
        gm_json_end_object(w);
    }
    if (r->searched) {
        gm_json_key(w, "search");
        gm_json_begin_object(w);
        gm_json_kv_str(w, "what",
                       r->search.what == GM_SEARCH_BATCH           ? "batch"
                       : r->search.what == GM_SEARCH_MAX_MODEL_LEN ? "max_model_len"
                       : j->mode == GM_EST_TRAIN                   ? "seq"
                                                                   : "context");
        gm_json_kv_u64(w, "largest_fitting", r->search.value);
        gm_json_kv_bool(w, "limit_reached", r->search.hit_limit);
        gm_json_kv_u64(w, "limit", r->search.limit);
        if (!r->search.hit_limit) {
            gm_json_kv_str(w, "limited_by", gm_fit_reason_name(r->search.limited_by));
            gm_json_kv_str(w, "limited_by_text", r->search.limit_text);
        }
        gm_json_end_object(w);
    }
}

/* A serving job that fits: the engine's command line and the requests its pool serves. */
static void json_plan(struct gm_json *w, const struct gm_estimate_report *r)
{
    gm_json_key(w, "plan");
    gm_json_begin_object(w);
    gm_json_kv_str(w, "engine", gm_engine_name(r->job.engine.kind));
    gm_json_kv_str(w, "command", r->plan);
    gm_json_key(w, "budget");
    gm_json_begin_array(w);
    for (size_t i = 0; i < r->n_budget; i++) {
        gm_json_begin_object(w);
        gm_json_kv_u64(w, "tokens_per_request", r->budget[i].tokens);
        gm_json_kv_u64(w, "requests", r->budget[i].requests);
        gm_json_end_object(w);
    }
    gm_json_end_array(w);
    gm_json_end_object(w);
}

static void json_deepspeed(struct gm_json *w, const struct gm_deepspeed *d)
{
    gm_json_key(w, "deepspeed");
    gm_json_begin_object(w);
    gm_json_kv_i64(w, "stage", d->stage);
    gm_json_kv_u64(w, "total_params", d->total_params);
    gm_json_kv_u64(w, "largest_layer_params", d->largest_layer_params);
    gm_json_kv_u64(w, "gpus_per_node", d->gpus_per_node);
    gm_json_kv_u64(w, "nodes", d->nodes);
    gm_json_kv_double(w, "additional_buffer_factor", d->buffer_factor);
    gm_json_key(w, "zero_paper_bytes");
    gm_json_begin_object(w);
    gm_json_kv_u64(w, "baseline", d->zero_paper[0]);
    gm_json_kv_u64(w, "os", d->zero_paper[1]);
    gm_json_kv_u64(w, "os_g", d->zero_paper[2]);
    gm_json_kv_u64(w, "os_g_p", d->zero_paper[3]);
    gm_json_end_object(w);
    gm_json_key(w, "rows");
    gm_json_begin_array(w);
    for (size_t i = 0; i < d->n_rows; i++) {
        gm_json_begin_object(w);
        gm_json_kv_bool(w, "offload_optimizer", d->rows[i].offload_optimizer);
        if (d->stage == 3) {
            gm_json_kv_bool(w, "offload_params", d->rows[i].offload_params);
            gm_json_kv_bool(w, "zero_init", d->rows[i].zero_init);
        }
        gm_json_kv_u64(w, "cpu_bytes", d->rows[i].cpu_bytes);
        gm_json_kv_u64(w, "gpu_bytes", d->rows[i].gpu_bytes);
        gm_json_end_object(w);
    }
    gm_json_end_array(w);
    gm_json_end_object(w);
}

enum gm_status gm_estimate_report_json(FILE *f, const struct gm_estimate_report *r,
                                       struct gm_error *err)
{
    const struct gm_estimate *e = r->est;
    struct gm_json w;

    gm_json_init(&w, f, GM_JSON_PRETTY);
    gm_json_begin_object(&w);
    gm_json_kv_str(&w, "schema", "gpumem.estimate/1");
    gm_json_kv_str(&w, "gpumem_version", gm_version());
    json_inputs(&w, r);
    json_model(&w, r->job.model.model);
    json_estimate(&w, e);
    if (r->job.method == GM_METHOD_BLOG && e->mode == GM_EST_TRAIN)
        gm_json_kv_double(&w, "activations_per_token", e->activations_per_token);
    gm_json_key(&w, "assumptions");
    gm_json_begin_array(&w);
    for (size_t i = 0; i < e->n_assumptions; i++)
        gm_json_str(&w, e->assumptions[i]);
    gm_json_end_array(&w);
    json_fit(&w, r);
    if (r->job.model.files)
        json_model_file(&w, r->job.model.files);
    if (extended(r)) {
        json_layout(&w, r);
        json_extras(&w, r);
    }
    if (r->has_deepspeed)
        json_deepspeed(&w, &r->deepspeed);
    if (r->plan)
        json_plan(&w, r);
    gm_json_end_object(&w);
    if (!gm_json_finish(&w))
        return gm_fail(err, GM_ERR_IO, GM_NO_OFFSET, "writing the JSON document failed");
    return GM_OK;
}
