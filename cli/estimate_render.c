/* SPDX-License-Identifier: MIT */
/* estimate_render.c - render an estimate: a table with bytes, GB (1e9) and GiB (2^30)
 * columns, the phase peaks, the three predicted figures, the fit verdict and every
 * assumption; or the gpumem.estimate/1 JSON document.  Reads its inputs only. */
#include "estimate_render.h"

#include "gpumem/json.h"
#include "gpumem/units.h"

#include <string.h>

static const char *mode_name(enum gm_est_mode m)
{
    return m == GM_EST_TRAIN ? "train" : m == GM_EST_INFER ? "infer" : "weights";
}

static void bytes_cols(FILE *f, uint64_t b)
{
    fprintf(f, " %16llu %11.2f %11.2f\n", (unsigned long long)b, (double)b / 1e9,
            (double)b / (double)GM_GIB);
}

static const char *peak_phase_name(const struct est_view *v)
{
    if (v->e->mode == GM_EST_WEIGHTS)
        return "weights";
    return gm_est_phase_name(v->e->peak_phase);
}

static void text_weights(FILE *f, const struct est_view *v)
{
    const struct gm_estimate *e = v->e;
    char gb[32], gib[32];
    fprintf(f, "parameters: %llu\n", (unsigned long long)e->n_params);
    gm_format_fixed(gb, sizeof gb, e->weight_bytes, GM_GB, "GB");
    gm_format_fixed(gib, sizeof gib, e->weight_bytes, GM_GIB, "GiB");
    fprintf(f, "weights: %llu bytes = %s = %s (%s)\n", (unsigned long long)e->weight_bytes, gb, gib,
            e->components[0].note);
    if (v->in->reserve_bytes) {
        char r[32];
        gm_format_fixed(r, sizeof r, v->in->reserve_bytes, GM_GIB, "GiB");
        gm_format_fixed(gb, sizeof gb, e->device_bytes, GM_GB, "GB");
        gm_format_fixed(gib, sizeof gib, e->device_bytes, GM_GIB, "GiB");
        fprintf(f, "with the %s reserve: %llu bytes = %s = %s\n", r,
                (unsigned long long)e->device_bytes, gb, gib);
        fprintf(f, "note: the %s reserve is an assumption, not a proof that the job fits\n", r);
    } else {
        gm_format_fixed(gb, sizeof gb, e->device_bytes, GM_GB, "GB");
        gm_format_fixed(gib, sizeof gib, e->device_bytes, GM_GIB, "GiB");
        fprintf(f, "with CUDA context and workspaces: %llu bytes = %s = %s\n",
                (unsigned long long)e->device_bytes, gb, gib);
    }
}

/* Catalog indices in ascending capacity order (smallest GPU that fits first). */
static size_t gpus_by_size(size_t *idx, size_t max)
{
    size_t n = gm_gpu_catalog_count() < max ? gm_gpu_catalog_count() : max;
    for (size_t i = 0; i < n; i++) {
        size_t j = i;
        idx[i] = i;
        while (j > 0 && gm_gpu_catalog_get(idx[j - 1])->memory_bytes >
                            gm_gpu_catalog_get(idx[j])->memory_bytes) {
            size_t t = idx[j];
            idx[j] = idx[j - 1];
            idx[j - 1] = t;
            j--;
        }
    }
    return n;
}

/* ANSI colour for verdicts (--color; NO_COLOR honoured by the caller). */
static const char *color_on(const struct est_view *v, bool good)
{
    return v->color ? (good ? "\033[32m" : "\033[1;31m") : "";
}

static const char *color_off(const struct est_view *v)
{
    return v->color ? "\033[0m" : "";
}

/* 2 + 48 spaces: continues a wrapped suggestion under its figures. */
#define WRAP_PAD "                                                  "

static void text_fit(FILE *f, const struct est_view *v)
{
    const struct gm_estimate *e = v->e;
    if (v->gpu_bytes) {
        bool fits = e->device_bytes <= v->gpu_bytes;
        uint64_t d = fits ? v->gpu_bytes - e->device_bytes : e->device_bytes - v->gpu_bytes;
        fprintf(f, "\nfit on %s (%.2f GiB): %s%s%s, %s %.2f GiB\n", v->gpu_label,
                (double)v->gpu_bytes / (double)GM_GIB, color_on(v, fits), fits ? "yes" : "NO",
                color_off(v), fits ? "headroom" : "short by", (double)d / (double)GM_GIB);
    } else {
        int n = 0;
        size_t idx[64], count = gpus_by_size(idx, 64);
        fprintf(f, "\nfits on (device used <= total memory):");
        for (size_t i = 0; i < count; i++) {
            const struct gm_gpu *g = gm_gpu_catalog_get(idx[i]);
            if (g->memory_bytes >= e->device_bytes) {
                fprintf(f, "%s %s", n ? "," : "", g->name);
                n++;
            }
        }
        fprintf(f, "%s\n", n ? "" : " none of the catalog GPUs (see --list-gpus)");
    }
    if (v->n_sugg) {
        fprintf(f, "\nwhat to change (one change at a time, device used):\n");
        for (int i = 0; i < v->n_sugg; i++)
            fprintf(f, "  %-48s%s %9.2f GiB%s%s%s\n", v->sugg[i].change,
                    strlen(v->sugg[i].change) > 48 ? "\n" WRAP_PAD : "",
                    (double)v->sugg[i].device_bytes / (double)GM_GIB,
                    v->gpu_bytes ? color_on(v, v->sugg[i].fits) : "",
                    v->gpu_bytes ? (v->sugg[i].fits ? "  fits" : "  does not fit") : "",
                    v->gpu_bytes ? color_off(v) : "");
    }
}

void est_render_text(FILE *f, const struct est_view *v)
{
    const struct gm_estimate *e = v->e;
    const struct gm_estimate_inputs *in = v->in;

    if (v->model)
        fprintf(f, "model: %s (%s, %llu layers, hidden %llu, %llu heads / %llu KV heads)\n",
                v->model->name[0] ? v->model->name : "config.json",
                v->model->model_type[0] ? v->model->model_type : "?",
                (unsigned long long)v->model->n_layers, (unsigned long long)v->model->hidden,
                (unsigned long long)v->model->n_heads, (unsigned long long)v->model->n_kv_heads);
    if (e->mode == GM_EST_WEIGHTS) {
        text_weights(f, v);
    } else {
        fprintf(f, "parameters: %llu\n", (unsigned long long)e->n_params);
        if (e->mode == GM_EST_TRAIN)
            fprintf(f, "job: training, %s, %s, batch %llu x seq %llu, method %s\n",
                    gm_precision_name(in->precision), gm_optimizer_name(in->optimizer),
                    (unsigned long long)in->batch, (unsigned long long)in->seq,
                    in->method == GM_METHOD_BLOG ? "blog" : "arch");
        else
            fprintf(f, "job: inference, batch %llu x (%llu context + %llu new tokens)\n",
                    (unsigned long long)in->batch, (unsigned long long)in->context,
                    (unsigned long long)in->new_tokens);
        fprintf(f, "\n%-30s %-24s %16s %11s %11s\n", "component", "live during", "bytes", "GB",
                "GiB");
        for (size_t i = 0; i < e->n_components; i++) {
            fprintf(f, "%-30s %-24s", e->components[i].name,
                    gm_est_phases_name(e->components[i].phases));
            bytes_cols(f, e->components[i].bytes);
        }
        fprintf(f, "\nphase peaks (allocated)\n");
        if (e->mode == GM_EST_TRAIN) {
            fprintf(f, "%-55s", "  forward/backward (max of start/end of backward)");
            bytes_cols(f, e->forward_backward_bytes);
            fprintf(f, "%-55s", "  optimizer step");
            bytes_cols(f, e->optimizer_step_bytes);
        } else {
            fprintf(f, "%-55s", "  prefill");
            bytes_cols(f, e->prefill_bytes);
            fprintf(f, "%-55s", "  decode");
            bytes_cols(f, e->decode_bytes);
        }
        fprintf(f, "  dominant phase: %s\n", peak_phase_name(v));
        fprintf(f, "\npredicted\n");
        fprintf(f, "%-55s", "  peak allocated (torch max_memory_allocated)");
        bytes_cols(f, e->peak_allocated_bytes);
        fprintf(f, "%-55s", "  peak reserved (torch max_memory_reserved)");
        bytes_cols(f, e->peak_reserved_bytes);
        fprintf(f, "%-55s", "  device used (nvidia-smi, + context + workspaces)");
        bytes_cols(f, e->device_bytes);
    }
    text_fit(f, v);
    fprintf(f, "\nassumptions:\n");
    for (size_t i = 0; i < e->n_assumptions; i++)
        fprintf(f, "  - %s\n", e->assumptions[i]);
    if (e->mode != GM_EST_WEIGHTS || !in->reserve_bytes) {
        fprintf(f,
                "  - peak reserved = allocated + %.2f x transient memory of the peak phase "
                "(allocator fragmentation), rounded to 2 MiB\n",
                in->fragmentation);
        fprintf(f,
                "  - device used adds %.0f MiB CUDA context and %.0f MiB library workspaces "
                "(--cuda-context, --workspace)\n",
                (double)e->cuda_context_bytes / (double)GM_MIB,
                (double)e->workspace_bytes / (double)GM_MIB);
    }
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
    gm_json_end_object(w);
}

static void json_inputs(struct gm_json *w, const struct est_view *v)
{
    static const char *const impl[] = {"foreach", "fused", "for-loop"};
    const struct gm_estimate_inputs *in = v->in;
    gm_json_key(w, "inputs");
    gm_json_begin_object(w);
    gm_json_kv_str(w, "mode", mode_name(in->mode));
    gm_json_kv_str(w, "method", in->method == GM_METHOD_BLOG ? "blog" : "arch");
    if (v->model)
        gm_json_kv_str(w, "model", v->model->name);
    else
        gm_json_kv_null(w, "model");
    if (in->n_params)
        gm_json_kv_u64(w, "parameters", in->n_params);
    else
        gm_json_kv_null(w, "parameters");
    if (in->weight_bits > 0)
        gm_json_kv_double(w, "bits", in->weight_bits);
    else
        gm_json_kv_null(w, "bits");
    gm_json_kv_u64(w, "reserve_bytes", in->reserve_bytes);
    if (in->mode == GM_EST_TRAIN) {
        gm_json_kv_str(w, "precision", gm_precision_name(in->precision));
        gm_json_kv_str(w, "optimizer", gm_optimizer_name(in->optimizer));
        gm_json_kv_str(w, "optimizer_impl", impl[in->optim_impl]);
        gm_json_kv_u64(w, "batch", in->batch);
        gm_json_kv_u64(w, "seq", in->seq);
        gm_json_kv_str(w, "grad_checkpointing", in->grad_ckpt == GM_CKPT_FULL ? "full" : "none");
        gm_json_kv_str(w, "attention", in->attention == GM_ATTN_EAGER ? "eager" : "sdpa");
        gm_json_kv_str(w, "zero_grad",
                       in->zero_grad == GM_ZERO_GRAD_ZEROS ? "zeros" : "set-to-none");
        if (in->activations_per_token > 0)
            gm_json_kv_double(w, "activations_per_token", in->activations_per_token);
        else
            gm_json_kv_null(w, "activations_per_token");
    }
    if (in->mode == GM_EST_INFER) {
        gm_json_kv_u64(w, "batch", in->batch);
        gm_json_kv_u64(w, "context", in->context);
        gm_json_kv_u64(w, "new_tokens", in->new_tokens);
        gm_json_kv_str(w, "kv_dtype",
                       in->kv_dtype == GM_DTYPE_UNKNOWN ? "auto" : gm_dtype_name(in->kv_dtype));
        gm_json_kv_str(w, "attention", in->attention == GM_ATTN_EAGER ? "eager" : "sdpa");
        gm_json_kv_bool(w, "full_logits", in->full_logits);
    }
    gm_json_kv_u64(w, "cuda_context_bytes", in->cuda_context_bytes);
    gm_json_kv_u64(w, "workspace_bytes", in->workspace_bytes);
    gm_json_kv_double(w, "fragmentation", in->fragmentation);
    if (v->gpu_label)
        gm_json_kv_str(w, "gpu", v->gpu_label);
    else
        gm_json_kv_null(w, "gpu");
    gm_json_kv_u64(w, "gpu_memory_bytes", v->gpu_bytes);
    gm_json_end_object(w);
}

void est_render_json(struct gm_json *w, const struct est_view *v)
{
    const struct gm_estimate *e = v->e;
    json_inputs(w, v);
    json_model(w, v->model);
    gm_json_kv_u64(w, "parameters", e->n_params);
    gm_json_kv_u64(w, "weights_bytes", e->weight_bytes);
    gm_json_key(w, "components");
    gm_json_begin_array(w);
    for (size_t i = 0; i < e->n_components; i++) {
        gm_json_begin_object(w);
        gm_json_kv_str(w, "name", e->components[i].name);
        gm_json_kv_u64(w, "bytes", e->components[i].bytes);
        gm_json_kv_str(w, "phase", gm_est_phases_name(e->components[i].phases));
        gm_json_kv_bool(w, "transient", e->components[i].transient);
        gm_json_kv_str(w, "note", e->components[i].note);
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
    gm_json_kv_str(w, "phase", peak_phase_name(v));
    gm_json_end_object(w);
    gm_json_key(w, "overheads");
    gm_json_begin_object(w);
    gm_json_kv_u64(w, "cuda_context_bytes", e->cuda_context_bytes);
    gm_json_kv_u64(w, "workspace_bytes", e->workspace_bytes);
    gm_json_kv_u64(w, "reserve_bytes", v->in->reserve_bytes);
    gm_json_end_object(w);
    if (v->in->method == GM_METHOD_BLOG && e->mode == GM_EST_TRAIN)
        gm_json_kv_double(w, "activations_per_token", e->activations_per_token);
    gm_json_key(w, "assumptions");
    gm_json_begin_array(w);
    for (size_t i = 0; i < e->n_assumptions; i++)
        gm_json_str(w, e->assumptions[i]);
    gm_json_end_array(w);
    if (v->gpu_bytes) {
        gm_json_key(w, "fit");
        gm_json_begin_object(w);
        gm_json_kv_str(w, "gpu", v->gpu_label);
        gm_json_kv_u64(w, "capacity_bytes", v->gpu_bytes);
        gm_json_kv_bool(w, "fits", e->device_bytes <= v->gpu_bytes);
        gm_json_kv_i64(w, "headroom_bytes", (int64_t)v->gpu_bytes - (int64_t)e->device_bytes);
        gm_json_end_object(w);
    } else {
        size_t idx[64], count = gpus_by_size(idx, 64);
        gm_json_key(w, "fits_on");
        gm_json_begin_array(w);
        for (size_t i = 0; i < count; i++)
            if (gm_gpu_catalog_get(idx[i])->memory_bytes >= e->device_bytes)
                gm_json_str(w, gm_gpu_catalog_get(idx[i])->name);
        gm_json_end_array(w);
    }
    gm_json_key(w, "suggestions");
    gm_json_begin_array(w);
    for (int i = 0; i < v->n_sugg; i++) {
        gm_json_begin_object(w);
        gm_json_kv_str(w, "change", v->sugg[i].change);
        gm_json_kv_u64(w, "device_bytes", v->sugg[i].device_bytes);
        if (v->gpu_bytes)
            gm_json_kv_bool(w, "fits", v->sugg[i].fits);
        gm_json_end_object(w);
    }
    gm_json_end_array(w);
}
