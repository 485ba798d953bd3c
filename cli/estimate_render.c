/* SPDX-License-Identifier: MIT */
/* estimate_render.c - render an estimate report as text: a table with bytes, GB (1e9) and
 * GiB (2^30) columns, the phase peaks, the three predicted figures, the fit verdict with
 * what to change, every assumption, and the setup's own sections.  Reads its input only:
 * every figure, verdict and sentence comes from the library. */
#include "estimate_render.h"

#include "gpumem/units.h"

#include <string.h>

static void bytes_cols(FILE *f, uint64_t b)
{
    fprintf(f, " %16llu %11.2f %11.2f\n", (unsigned long long)b, (double)b / 1e9,
            (double)b / (double)GM_GIB);
}

static void gib(char *b, size_t n, uint64_t v)
{
    gm_format_fixed(b, n, v, GM_GIB, "GiB");
}

static const char *color_on(bool color, bool good)
{
    return color ? (good ? "\033[32m" : "\033[1;31m") : "";
}

static const char *color_off(bool color)
{
    return color ? "\033[0m" : "";
}

static const struct gm_est_component *find_kind(const struct gm_estimate *e, enum gm_est_kind k)
{
    for (size_t i = 0; i < e->n_components; i++)
        if (e->components[i].kind == k)
            return &e->components[i];
    return NULL;
}

static void text_weights(FILE *f, const struct gm_estimate_report *r)
{
    const struct gm_estimate *e = r->est;
    const struct gm_est_component *w = find_kind(e, GM_KIND_WEIGHTS);
    uint64_t reserve = gm_estimate_kind_bytes(e, GM_KIND_RESERVE);
    char gb[32], gi[32];
    fprintf(f, "parameters: %llu\n", (unsigned long long)e->n_params);
    gm_format_fixed(gb, sizeof gb, e->weight_bytes, GM_GB, "GB");
    gm_format_fixed(gi, sizeof gi, e->weight_bytes, GM_GIB, "GiB");
    fprintf(f, "weights: %llu bytes = %s = %s (%s)\n", (unsigned long long)e->weight_bytes, gb, gi,
            w ? w->note : "");
    gm_format_fixed(gb, sizeof gb, e->device_bytes, GM_GB, "GB");
    gm_format_fixed(gi, sizeof gi, e->device_bytes, GM_GIB, "GiB");
    if (reserve) {
        char res[32];
        gm_format_fixed(res, sizeof res, reserve, GM_GIB, "GiB");
        fprintf(f, "with the %s reserve: %llu bytes = %s = %s\n", res,
                (unsigned long long)e->device_bytes, gb, gi);
        fprintf(f, "note: the %s reserve is an assumption, not a proof that the job fits\n", res);
    } else {
        fprintf(f, "with CUDA context and workspaces: %llu bytes = %s = %s\n",
                (unsigned long long)e->device_bytes, gb, gi);
    }
}

/* The low and high ends of the figures, and what spreads them. */
static void text_range(FILE *f, const struct gm_est_range *r)
{
    static const char *const labels[3] = {"  peak allocated", "  peak reserved", "  device used"};
    const uint64_t *ends[3] = {r->allocated_bytes, r->reserved_bytes, r->device_bytes};
    char from[GM_EST_NOTE_MAX] = "";
    if (!r->sources)
        return;
    for (unsigned b = 1; b & GM_UNCERTAIN__ALL; b <<= 1)
        if (r->sources & b)
            snprintf(from + strlen(from), sizeof from - strlen(from), "%s%s", from[0] ? ", " : "",
                     gm_est_uncertainty_name(b));
    fprintf(f, "\nrange (low - high, from: %s)\n", from);
    for (size_t i = 0; i < 3; i++)
        fprintf(f, "%-40s %11.2f - %.2f GiB\n", labels[i], (double)ends[i][0] / (double)GM_GIB,
                (double)ends[i][1] / (double)GM_GIB);
}

static void text_table(FILE *f, const struct gm_estimate_report *r)
{
    const struct gm_estimate *e = r->est;
    const struct gm_job *j = &r->job;
    fprintf(f, "parameters: %llu\n", (unsigned long long)e->n_params);
    if (e->mode == GM_EST_TRAIN)
        fprintf(f, "job: training, %s, %s, batch %llu x seq %llu, method %s\n",
                gm_precision_name(j->numerics.precision), gm_optimizer_name(j->numerics.optimizer),
                (unsigned long long)j->workload.batch, (unsigned long long)j->workload.seq,
                j->method == GM_METHOD_BLOG ? "blog" : "arch");
    else
        fprintf(f, "job: inference, batch %llu x (%llu context + %llu new tokens)\n",
                (unsigned long long)j->workload.batch, (unsigned long long)j->workload.context,
                (unsigned long long)j->workload.new_tokens);
    fprintf(f, "\n%-30s %-24s %16s %11s %11s\n", "component", "live during", "bytes", "GB", "GiB");
    for (size_t i = 0; i < e->n_components; i++) {
        const struct gm_est_component *c = &e->components[i];
        if (gm_est_kind_outside_allocator(c->kind))
            continue;
        fprintf(f, "%-30s %-24s", c->name, gm_est_phases_name(c->phases));
        bytes_cols(f, c->bytes);
    }
    fprintf(f, "\nphase peaks (allocated)\n");
    if (e->mode == GM_EST_TRAIN) {
        fprintf(f, "%-55s", "  forward/backward (max of loss, start/end of backward)");
        bytes_cols(f, e->forward_backward_bytes);
        fprintf(f, "%-55s", "  optimizer step");
        bytes_cols(f, e->optimizer_step_bytes);
    } else if (j->model.model && j->model.model->head == GM_HEAD_ENCODER) {
        /* ---- an encoder's one forward pass ---- */
        fprintf(f, "%-55s", "  forward");
        bytes_cols(f, e->prefill_bytes);
    } else {
        fprintf(f, "%-55s", "  prefill");
        bytes_cols(f, e->prefill_bytes);
        fprintf(f, "%-55s", "  decode");
        bytes_cols(f, e->decode_bytes);
    }
    fprintf(f, "  dominant phase: %s\n",
            j->model.model && j->model.model->head == GM_HEAD_ENCODER && e->mode == GM_EST_INFER
                ? "forward"
                : gm_est_phase_name(e->peak_phase));
    fprintf(f, "\npredicted\n");
    fprintf(f, "%-55s", "  peak allocated (torch max_memory_allocated)");
    bytes_cols(f, e->peak_allocated_bytes);
    fprintf(f, "%-55s", "  peak reserved (torch max_memory_reserved)");
    bytes_cols(f, e->peak_reserved_bytes);
    fprintf(f, "%-55s", "  device used (nvidia-smi, + outside the allocator)");
    bytes_cols(f, e->device_bytes);
    text_range(f, &e->range);
}

static const char *verdict_word(const struct gm_est_fit *fit)
{
    return fit->verdict == GM_VERDICT_BORDERLINE ? "borderline" : fit->fits ? "yes" : "NO";
}

static void text_fit(FILE *f, const struct gm_estimate_report *r, const struct est_render_opts *o)
{
    bool color = o->color;
    size_t shown;
    const struct gm_est_fit *fit = &r->est->fit;
    const struct gm_est_suggestions *s = &r->suggestions;
    if (!r->job.gpu.memory_bytes) {
        fprintf(f, "\nfits on (device used <= total memory):");
        for (size_t i = 0; i < r->n_fits_on; i++)
            fprintf(f, "%s %s", i ? "," : "", gm_gpu_catalog_get(r->fits_on[i])->name);
        fprintf(f, "%s\n", r->n_fits_on ? "" : " none of the catalog GPUs (see --list-gpus)");
        return;
    }
    fprintf(f, "\nfit on %s (%.2f GiB): %s%s%s, %s (%s)\n", r->job.gpu.label,
            (double)fit->capacity_bytes / (double)GM_GIB,
            color_on(color, fit->verdict != GM_VERDICT_DOES_NOT_FIT && fit->fits),
            verdict_word(fit), color_off(color), fit->text, fit->range_text);
    if (!s->n && !s->none_fits)
        return;
    fprintf(f, "\nwhat to change (device used; %s):\n",
            s->n && s->items[0].fits ? "on the GPUs given first, cheapest first"
                                     : "closest to fitting first");
    shown = o->max_suggestions && o->max_suggestions < s->n ? o->max_suggestions : s->n;
    for (size_t i = 0; i < shown; i++) {
        const struct gm_est_suggestion *g = &s->items[i];
        char change[160], verdict[64];
        snprintf(change, sizeof change, "%s%s", g->combined ? "together: " : "", g->change);
        if (g->reason == GM_FIT_FITS_PAGED)
            snprintf(verdict, sizeof verdict, "fits with %.2f GiB paged to host",
                     (double)g->paged_bytes / (double)GM_GIB);
        else
            snprintf(verdict, sizeof verdict, "%s", g->fits ? "fits" : "does not fit");
        fprintf(f, "  %-46s %8.2f GiB  %s%s%s: %s\n", change,
                (double)g->device_bytes / (double)GM_GIB, color_on(color, g->fits), verdict,
                color_off(color), g->trade);
    }
    if (shown < s->n)
        fprintf(f, "  (%zu more: --all-suggestions)\n", s->n - shown);
    if (s->none_fits)
        fprintf(f, "  nothing fits: no change above, no combination of them and no GPU of the "
                   "catalog makes this job fit\n");
}

/* A serving job that fits: the engine's own command line, and how many requests its pool
 * serves at once by request length. */
static void text_plan(FILE *f, const struct gm_estimate_report *r)
{
    if (!r->plan)
        return;
    fprintf(f, "\nto serve it (%s):\n  %s\n", gm_engine_name(r->job.engine.kind), r->plan);
    if (!r->n_budget)
        return;
    fprintf(f, "\nrequests at once by length (the KV pool of %llu tokens%s):\n",
            (unsigned long long)r->est->serving.kv_tokens,
            r->job.engine.kind == GM_ENGINE_VLLM ? ", max_num_seqs the cap" : "");
    if (r->job.engine.kind == GM_ENGINE_SGLANG &&
        r->est->serving.kv_tokens < r->est->serving.max_model_len)
        fprintf(f, "  (SGLang cuts a longer request's input to %llu tokens, the pool less one)\n",
                (unsigned long long)(r->est->serving.kv_tokens - 1));
    for (size_t i = 0; i < r->n_budget; i++)
        fprintf(f, "  %10llu tokens  %6llu\n", (unsigned long long)r->budget[i].tokens,
                (unsigned long long)r->budget[i].requests);
}

static void text_model_files(FILE *f, const struct gm_modelfile *mf)
{
    fprintf(f,
            "\nmodel files: %s, %llu file%s, %llu tensors, %llu parameters, %llu bytes "
            "(headers read: %llu bytes)\n",
            mf->format == GM_MODELFILE_GGUF ? "GGUF" : "safetensors",
            (unsigned long long)mf->n_files, mf->n_files == 1 ? "" : "s",
            (unsigned long long)mf->n_tensors, (unsigned long long)mf->n_params,
            (unsigned long long)mf->n_bytes, (unsigned long long)mf->header_bytes);
    for (size_t i = 0; i < mf->n_dtypes; i++)
        fprintf(f, "  %-10s %6llu tensors %16llu elements %16llu bytes\n", mf->dtypes[i].name,
                (unsigned long long)mf->dtypes[i].n_tensors,
                (unsigned long long)mf->dtypes[i].n_elements,
                (unsigned long long)mf->dtypes[i].n_bytes);
    if (mf->largest_module[0])
        fprintf(f, "  largest module: %s (%llu parameters)\n", mf->largest_module,
                (unsigned long long)mf->largest_module_params);
}

static void ds_option_text(char *b, size_t n, const struct gm_deepspeed *d,
                           const struct gm_deepspeed_row *r)
{
    if (d->stage == 2)
        snprintf(b, n, "offload_optimizer=%s", r->offload_optimizer ? "cpu" : "none");
    else
        snprintf(b, n, "offload_param=%s, offload_optimizer=%s, zero_init=%d",
                 r->offload_params ? "cpu" : "none", r->offload_optimizer ? "cpu" : "none",
                 r->zero_init ? 1 : 0);
}

static void text_deepspeed(FILE *f, const struct gm_estimate_report *r)
{
    const struct gm_deepspeed *d = &r->deepspeed;
    char a[32], b[32];
    fprintf(f,
            "%sDeepSpeed ZeRO-%d model-state estimator (estimate_zero%d_model_states_mem_"
            "needs_all_cold), reproduced:\n",
            r->deepspeed_only ? "" : "\n", d->stage, d->stage);
    fprintf(f, "  HW: %llu node%s, %llu GPU%s per node; SW: %llu params",
            (unsigned long long)d->nodes, d->nodes > 1 ? "s" : "",
            (unsigned long long)d->gpus_per_node, d->gpus_per_node > 1 ? "s" : "",
            (unsigned long long)d->total_params);
    if (d->stage == 3)
        fprintf(f, ", %llu largest layer params", (unsigned long long)d->largest_layer_params);
    fprintf(f, "\n  %12s %12s   %s\n", "per CPU", "per GPU", "options");
    for (size_t i = 0; i < d->n_rows; i++) {
        char opt[96];
        gib(a, sizeof a, d->rows[i].cpu_bytes);
        gib(b, sizeof b, d->rows[i].gpu_bytes);
        ds_option_text(opt, sizeof opt, d, &d->rows[i]);
        fprintf(f, "  %12s %12s   %s\n", a, b, opt);
    }
    fprintf(f,
            "  ZeRO paper (Rajbhandari et al. 2020, K = 12) per GPU over %llu ranks: "
            "baseline %.2f GB, P_os %.2f GB, P_os+g %.2f GB, P_os+g+p %.2f GB\n",
            (unsigned long long)(d->gpus_per_node * d->nodes), (double)d->zero_paper[0] / 1e9,
            (double)d->zero_paper[1] / 1e9, (double)d->zero_paper[2] / 1e9,
            (double)d->zero_paper[3] / 1e9);
    fprintf(f, "  DeepSpeed prints these GiB (2^30) figures labelled \"GB\"; model states "
               "only: no activations, buffers or CUDA context.\n");
    fprintf(f, "  %s\n",
            r->deepspeed_only ? "Give a MODEL for gpumem's fuller per-device estimate "
                                "(activations, buffers, context)."
                              : "gpumem's fuller per-device estimate for this setup is above.");
}

static void text_devices(FILE *f, const struct gm_estimate_report *r)
{
    const struct gm_job *j = &r->job;
    const struct gm_est_layout *l = &r->est->layout;
    char a[32], b[32], c[32], pp[32] = "", cp[96] = "";
    if (j->parallel.pp > 1)
        snprintf(pp, sizeof pp, ", pp %llu", (unsigned long long)j->parallel.pp);
    if (j->parallel.cp > 1)
        snprintf(cp, sizeof cp, ", cp %llu (%llu data x %llu context ranks)",
                 (unsigned long long)j->parallel.cp, (unsigned long long)(l->dp / j->parallel.cp),
                 (unsigned long long)j->parallel.cp);
    fprintf(f, "\nper device: %s, %llu GPUs (%llu per node, %llu node%s), tp %llu%s%s%s\n",
            j->mode != GM_EST_TRAIN                           ? "inference"
            : j->parallel.shard != GM_SHARD_NONE || l->dp > 1 ? gm_shard_name(j->parallel.shard)
                                                              : "no data parallelism",
            (unsigned long long)l->gpus, (unsigned long long)l->gpus_per_node,
            (unsigned long long)l->nodes, l->nodes > 1 ? "s" : "",
            (unsigned long long)j->parallel.tp,
            j->parallel.sequence_parallel ? " + sequence parallel" : "", pp, cp);
    for (size_t i = 0; i < l->n_groups; i++) {
        const struct gm_device_group *g = &l->groups[i];
        char layers[48] = "";
        gib(a, sizeof a, g->allocated_bytes);
        gib(b, sizeof b, g->reserved_bytes);
        gib(c, sizeof c, g->device_bytes);
        if (g->layers)
            snprintf(layers, sizeof layers, " (%s, %llu layers)", g->role,
                     (unsigned long long)g->layers);
        fprintf(f, "  ranks %llu-%llu%s: allocated %s, reserved %s, device %s each\n",
                (unsigned long long)g->first_rank,
                (unsigned long long)(g->first_rank + g->count - 1), layers, a, b, c);
    }
    if (l->host_bytes_per_node) {
        gib(a, sizeof a, l->host_bytes_per_node);
        fprintf(f, "  host memory per node for offloaded state: %llu bytes = %s\n",
                (unsigned long long)l->host_bytes_per_node, a);
    }
}

static void text_setup(FILE *f, const struct gm_estimate_report *r)
{
    const struct gm_job *j = &r->job;
    const struct gm_estimate *e = r->est;
    const struct gm_est_serving *sv = &e->serving;
    char a[32], b[32];

    if (j->model.files)
        text_model_files(f, j->model.files);
    if (r->has_deepspeed)
        text_deepspeed(f, r);
    if (j->memory.adapter != GM_ADAPTER_NONE) {
        fprintf(f, "\n%s: rank %llu, %llu trainable adapter parameters, frozen base %llu bytes",
                j->memory.adapter == GM_ADAPTER_QLORA ? "QLoRA" : "LoRA",
                (unsigned long long)j->memory.lora.rank,
                (unsigned long long)e->lora.trainable_params,
                (unsigned long long)e->lora.base_weight_bytes);
        if (j->memory.adapter == GM_ADAPTER_QLORA)
            fprintf(f, " (NF4 constants %llu bytes)",
                    (unsigned long long)e->lora.nf4_constant_bytes);
        fprintf(f, "\n");
    }
    if (!r->deepspeed_only && (j->parallel.gpus > 1 || j->parallel.tp > 1 || j->parallel.pp > 1 ||
                               j->parallel.shard != GM_SHARD_NONE))
        text_devices(f, r);
    if (j->memory.paged_optimizer && e->fit.reason == GM_FIT_DEVICE_OVER) {
        gib(a, sizeof a, e->pageable_bytes);
        fprintf(f,
                "\npaged optimizer: even with all %s of its state in host memory the job "
                "does not fit\n",
                a);
    }
    if (j->mode == GM_EST_INFER && j->engine.kind == GM_ENGINE_VLLM) {
        char t[32];
        gib(a, sizeof a, sv->budget_bytes);
        gib(b, sizeof b, sv->kv_pool_bytes);
        gib(t, sizeof t, sv->total_bytes);
        fprintf(f,
                "\nvLLM: budget %s (%.2f x the %s CUDA reports); KV pool %s = %llu blocks x "
                "%llu tokens = %llu tokens (%llu bytes per token)\n",
                a, j->engine.vllm.gpu_memory_utilization, t, b, (unsigned long long)sv->kv_blocks,
                (unsigned long long)sv->block_size, (unsigned long long)sv->kv_tokens,
                (unsigned long long)sv->kv_bytes_per_token);
        if (sv->cuda_graph_charged_bytes) {
            gib(a, sizeof a, sv->cuda_graph_charged_bytes);
            fprintf(f,
                    "  the budget pays vLLM's own CUDA-graph estimate, %s (the device holds the "
                    "graphs as captured: cuda_graphs)\n",
                    a);
        }
        fprintf(f, "  max_model_len %llu: %.2f concurrent sequences at full length%s\n",
                (unsigned long long)sv->max_model_len, sv->max_concurrency,
                sv->kv_tokens < sv->max_model_len ? " - vLLM would refuse to start" : "");
    }
    if (j->mode == GM_EST_INFER && j->engine.kind == GM_ENGINE_LLAMACPP) {
        gib(a, sizeof a, sv->compute_buffer_bytes);
        fprintf(f, "\nllama.cpp: KV %llu bytes per token; compute buffer %s\n",
                (unsigned long long)sv->kv_bytes_per_token, a);
    }
    if (r->searched) {
        const char *what = r->search.what == GM_SEARCH_BATCH ? "batch"
                           : j->mode == GM_EST_TRAIN         ? "seq"
                                                             : "context";
        gib(a, sizeof a, e->device_bytes);
        if (r->search.value)
            fprintf(f, "\nlargest %s that fits %s: %llu (device %s at that %s)\n", what,
                    j->gpu.label, (unsigned long long)r->search.value, a, what);
        else
            fprintf(f, "\nlargest %s that fits %s: none\n", what, j->gpu.label);
        if (r->search.hit_limit)
            fprintf(f,
                    "  limited by the search limit: %llu (the model's positions, stretched by "
                    "rope_scaling under vLLM, or 2^20)\n",
                    (unsigned long long)r->search.limit);
        else
            fprintf(f, "  what binds, at %llu: %s\n",
                    (unsigned long long)(r->search.value ? r->search.value + 1 : r->search.shown),
                    r->search.limit_text);
    }
}

void est_render_brief(FILE *f, const struct gm_estimate_report *r)
{
    const struct gm_est_fit *fit = &r->est->fit;
    const char *word;
    if (!r->job.gpu.memory_bytes) {
        fprintf(
            f, "device used %.2f GiB; fits on %s\n", (double)r->est->device_bytes / (double)GM_GIB,
            r->n_fits_on ? gm_gpu_catalog_get(r->fits_on[0])->name : "none of the catalog GPUs");
        return;
    }
    word = fit->verdict == GM_VERDICT_BORDERLINE ? "borderline"
           : fit->fits                           ? "fits"
                                                 : "does not fit";
    fprintf(f, "%s on %s: device %.2f of %.2f GiB, %s\n", word, r->job.gpu.label,
            (double)fit->device_bytes / (double)GM_GIB,
            (double)fit->capacity_bytes / (double)GM_GIB, fit->text);
}

void est_render_text(FILE *f, const struct gm_estimate_report *r, const struct est_render_opts *o)
{
    const struct gm_estimate *e = r->est;
    const struct gm_model *m = r->job.model.model;

    if (r->deepspeed_only) {
        text_deepspeed(f, r);
        return;
    }
    if (m) {
        /* ---- encoders, encoder-decoders and weight formats ---- */
        char more[128] = "";
        if (m->head == GM_HEAD_ENCODER)
            snprintf(more, sizeof more, ", encoder");
        else if (m->head == GM_HEAD_SEQ2SEQ_LM)
            snprintf(more, sizeof more, ", encoder-decoder: %llu decoder layers",
                     (unsigned long long)m->n_decoder_layers);
        if (m->kv_lora_rank)
            snprintf(more + strlen(more), sizeof more - strlen(more), ", MLA latent %llu + %llu",
                     (unsigned long long)m->kv_lora_rank, (unsigned long long)m->qk_rope_head_dim);
        if (m->quant.method != GM_QUANT_NONE && m->quant.method != GM_QUANT_GGUF)
            snprintf(more + strlen(more), sizeof more - strlen(more), ", %s",
                     gm_quant_method_name(m->quant.method));
        fprintf(f, "model: %s (%s, %llu layers, hidden %llu, %llu heads / %llu KV heads%s)\n",
                m->name[0] ? m->name : "(unnamed)", m->model_type[0] ? m->model_type : "?",
                (unsigned long long)m->n_layers, (unsigned long long)m->hidden,
                (unsigned long long)m->n_heads, (unsigned long long)m->n_kv_heads, more);
    }
    if (e->mode == GM_EST_WEIGHTS)
        text_weights(f, r);
    else
        text_table(f, r);
    text_fit(f, r, o);
    fprintf(f, "\nassumptions:\n");
    for (size_t i = 0; i < e->n_assumptions; i++)
        fprintf(f, "  - %s\n", e->assumptions[i]);
    text_setup(f, r);
    text_plan(f, r);
}
