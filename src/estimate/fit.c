/* SPDX-License-Identifier: MIT */
/* fit.c - the one fit predicate.
 *
 * A job fits when every device's predicted device-used figure is within its capacity AND
 * the engine would start and serve what was asked:
 *   vLLM       its KV pool holds one max_model_len sequence (else it refuses to start),
 *              and the requested concurrent sequences (batch x (context + new tokens),
 *              at most max_num_seqs);
 *   llama.cpp  the KV cache for n_ctx fits beside the weights (it is allocated up front).
 * A paged optimizer (bitsandbytes) keeps its state in unified memory: a job short by no
 * more than that state runs, with part of it paged to host memory.  Every verdict carries
 * its reason, a sentence, and how far the job is from fitting (shortfall_bytes), which the
 * suggestion engine compares across candidate changes.
 *
 * Over the range (the pipeline at the low and high ends of the uncertain assumptions) the
 * verdict is three-way: fits when the high end fits too, does not fit when not even the low
 * end does, borderline otherwise; the point estimate's 'fits' is unchanged. */
#include "estimate/estimate_int.h"

#include <stdio.h>
#include <string.h>

static double gib(uint64_t b)
{
    return (double)b / (double)GM_GIB;
}

void est_judge(const struct gm_job *job, const struct gm_estimate *e, uint64_t capacity,
               struct gm_est_fit *fit)
{
    const struct gm_est_layout *l = &e->layout;
    const struct gm_est_serving *sv = &e->serving;
    size_t worst = 0;
    bool over = false;

    memset(fit, 0, sizeof(*fit));
    fit->capacity_bytes = capacity;
    fit->device_bytes = e->device_bytes;
    for (size_t i = 0; i < l->n_groups; i++) {
        if (l->groups[i].device_bytes > fit->device_bytes)
            fit->device_bytes = l->groups[i].device_bytes;
        if (l->groups[i].device_bytes > l->groups[worst].device_bytes)
            worst = i;
    }
    if (!capacity) {
        fit->reason = GM_FIT_NOT_JUDGED;
        snprintf(fit->text, sizeof fit->text, "no GPU given");
        return;
    }
    fit->headroom_bytes = (int64_t)capacity - (int64_t)fit->device_bytes;
    for (size_t i = 0; i < l->n_groups; i++) {
        fit->group_fits[i] = l->groups[i].device_bytes <= capacity;
        over = over || !fit->group_fits[i];
    }
    if (!l->n_groups)
        over = e->device_bytes > capacity;

    if (over) {
        uint64_t short_by = fit->device_bytes - capacity;
        bool llamacpp = est_allocator(job) == EST_ALLOC_GGML;
        uint64_t kv = gm_estimate_kind_bytes(e, GM_KIND_KV_CACHE);
        if (job->mode == GM_EST_TRAIN && job->memory.paged_optimizer &&
            short_by <= e->pageable_bytes) {
            fit->reason = GM_FIT_FITS_PAGED;
            fit->fits = true;
            fit->paged_bytes = short_by;
            snprintf(fit->text, sizeof fit->text,
                     "with %.2f GiB of the paged optimizer state in host memory (slower "
                     "optimizer steps)",
                     gib(short_by));
            return;
        }
        fit->shortfall_bytes = short_by;
        if (llamacpp && kv >= short_by) {
            fit->reason = GM_FIT_CONTEXT_OVER;
            snprintf(fit->text, sizeof fit->text,
                     "short by %.2f GiB: the weights fit, the KV cache for n_ctx %llu does not",
                     gib(short_by), (unsigned long long)sv->n_ctx);
            return;
        }
        fit->reason = GM_FIT_DEVICE_OVER;
        if (l->n_groups > 1)
            snprintf(fit->text, sizeof fit->text, "short by %.2f GiB on ranks %llu-%llu (%s)",
                     gib(short_by), (unsigned long long)l->groups[worst].first_rank,
                     (unsigned long long)(l->groups[worst].first_rank + l->groups[worst].count - 1),
                     l->groups[worst].role);
        else
            snprintf(fit->text, sizeof fit->text, "short by %.2f GiB", gib(short_by));
        return;
    }
    if (est_allocator(job) == EST_ALLOC_VLLM) {
        uint64_t want =
            gm_mul_sat(job->workload.batch, job->workload.context + job->workload.new_tokens);
        uint64_t seqs = sv->max_num_seqs ? sv->max_num_seqs : job->engine.vllm.max_num_seqs;
        if (sv->kv_tokens < sv->max_model_len) {
            fit->reason = GM_FIT_ENGINE_NO_START;
            fit->shortfall_bytes =
                gm_mul_sat(sv->max_model_len - sv->kv_tokens, sv->kv_bytes_per_token);
            snprintf(fit->text, sizeof fit->text,
                     "vLLM would refuse to start: its KV pool holds %llu tokens, fewer than "
                     "max_model_len %llu",
                     (unsigned long long)sv->kv_tokens, (unsigned long long)sv->max_model_len);
            return;
        }
        if (sv->kv_tokens < want || job->workload.batch > seqs) {
            fit->reason = GM_FIT_ENGINE_CONCURRENCY;
            fit->shortfall_bytes =
                sv->kv_tokens < want
                    ? gm_mul_sat(want - sv->kv_tokens, sv->kv_bytes_per_token)
                    : gm_mul_sat(gm_mul_sat(job->workload.batch - seqs,
                                            job->workload.context + job->workload.new_tokens),
                                 sv->kv_bytes_per_token);
            snprintf(fit->text, sizeof fit->text,
                     "vLLM serves fewer than %llu sequences of %llu tokens at once (KV pool "
                     "%llu tokens, max_num_seqs %llu)",
                     (unsigned long long)job->workload.batch,
                     (unsigned long long)(job->workload.context + job->workload.new_tokens),
                     (unsigned long long)sv->kv_tokens, (unsigned long long)seqs);
            return;
        }
    }
    if (est_allocator(job) == EST_ALLOC_SGLANG) {
        uint64_t len = job->workload.context + job->workload.new_tokens;
        uint64_t want = gm_mul_sat(job->workload.batch, len);
        uint64_t reqs = job->engine.sglang.max_running_requests;
        if (!sv->kv_tokens) {
            fit->reason = GM_FIT_ENGINE_NO_START;
            fit->shortfall_bytes = gm_mul_sat(len, sv->kv_bytes_per_token);
            snprintf(fit->text, sizeof fit->text,
                     "SGLang would refuse to start: its static share leaves no room for a KV "
                     "cache beside the weights");
            return;
        }
        if (sv->kv_tokens < want || (reqs && job->workload.batch > reqs)) {
            fit->reason = GM_FIT_ENGINE_CONCURRENCY;
            fit->shortfall_bytes = sv->kv_tokens < want
                                       ? gm_mul_sat(want - sv->kv_tokens, sv->kv_bytes_per_token)
                                       : gm_mul_sat(gm_mul_sat(job->workload.batch - reqs, len),
                                                    sv->kv_bytes_per_token);
            snprintf(fit->text, sizeof fit->text,
                     "SGLang serves fewer than %llu sequences of %llu tokens at once (token "
                     "pool %llu tokens)",
                     (unsigned long long)job->workload.batch, (unsigned long long)len,
                     (unsigned long long)sv->kv_tokens);
            return;
        }
    }
    fit->reason = GM_FIT_FITS;
    fit->fits = true;
    if (e->replay.at_capacity)
        snprintf(fit->text, sizeof fit->text,
                 "headroom %.2f GiB: at the capacity, the allocator frees its cache and retries "
                 "(slower steps)",
                 gib((uint64_t)fit->headroom_bytes));
    else
        snprintf(fit->text, sizeof fit->text, "headroom %.2f GiB",
                 gib((uint64_t)fit->headroom_bytes));
}

enum gm_status est_stage_fit(struct est_ctx *cx, struct gm_error *err)
{
    (void)err;
    est_judge(cx->job, cx->e, cx->job->gpu.memory_bytes, &cx->e->fit);
    return GM_OK;
}

static uint64_t min_u64(uint64_t a, uint64_t b)
{
    return a < b ? a : b;
}

static uint64_t max_u64(uint64_t a, uint64_t b)
{
    return a > b ? a : b;
}

void est_judge_range(struct gm_estimate *e, const struct gm_estimate *lo,
                     const struct gm_estimate *hi)
{
    struct gm_est_range *r = &e->range;
    struct gm_est_fit *f = &e->fit;
    r->sources |= lo->range.sources | hi->range.sources;
    /* the point lies inside the range whatever the direction of each assumption */
    r->allocated_bytes[0] = min_u64(e->peak_allocated_bytes,
                                    min_u64(lo->peak_allocated_bytes, hi->peak_allocated_bytes));
    r->allocated_bytes[1] = max_u64(e->peak_allocated_bytes,
                                    max_u64(lo->peak_allocated_bytes, hi->peak_allocated_bytes));
    r->reserved_bytes[0] =
        min_u64(e->peak_reserved_bytes, min_u64(lo->peak_reserved_bytes, hi->peak_reserved_bytes));
    r->reserved_bytes[1] =
        max_u64(e->peak_reserved_bytes, max_u64(lo->peak_reserved_bytes, hi->peak_reserved_bytes));
    r->device_bytes[0] =
        min_u64(e->fit.device_bytes, min_u64(lo->fit.device_bytes, hi->fit.device_bytes));
    r->device_bytes[1] =
        max_u64(e->fit.device_bytes, max_u64(lo->fit.device_bytes, hi->fit.device_bytes));
    if (f->reason == GM_FIT_NOT_JUDGED) {
        f->verdict = GM_VERDICT_NOT_JUDGED;
        return;
    }
    f->headroom_low_bytes = (int64_t)f->capacity_bytes - (int64_t)r->device_bytes[1];
    f->headroom_high_bytes = (int64_t)f->capacity_bytes - (int64_t)r->device_bytes[0];
    /* a point estimate whose replay ran out of memory on the GPU even after freeing the
     * cache does not fit, whatever an end of the range does: its allocator would have to
     * reserve more than the device has */
    if (f->fits && lo->fit.fits && hi->fit.fits)
        f->verdict = GM_VERDICT_FITS;
    else if ((!f->fits && !lo->fit.fits && !hi->fit.fits) || (!f->fits && e->replay.oom))
        f->verdict = GM_VERDICT_DOES_NOT_FIT;
    else
        f->verdict = GM_VERDICT_BORDERLINE;
    if (r->device_bytes[0] == r->device_bytes[1] && f->verdict != GM_VERDICT_BORDERLINE)
        snprintf(f->range_text, sizeof f->range_text, "no uncertain assumption left");
    else if (f->verdict == GM_VERDICT_BORDERLINE && f->headroom_low_bytes >= 0)
        /* the device figures fit over the range; the engine's limit decides */
        snprintf(f->range_text, sizeof f->range_text,
                 "the devices fit over the range, the engine's limit not at one end");
    else if (f->headroom_low_bytes >= 0)
        snprintf(f->range_text, sizeof f->range_text, "headroom %.2f to %.2f GiB over the range",
                 (double)f->headroom_low_bytes / (double)GM_GIB,
                 (double)f->headroom_high_bytes / (double)GM_GIB);
    else if (f->headroom_high_bytes < 0)
        snprintf(f->range_text, sizeof f->range_text, "short by %.2f to %.2f GiB over the range",
                 (double)-f->headroom_high_bytes / (double)GM_GIB,
                 (double)-f->headroom_low_bytes / (double)GM_GIB);
    else
        snprintf(f->range_text, sizeof f->range_text,
                 "device %.2f to %.2f GiB over the range: %.2f GiB headroom to %.2f GiB short",
                 (double)r->device_bytes[0] / (double)GM_GIB,
                 (double)r->device_bytes[1] / (double)GM_GIB,
                 (double)f->headroom_high_bytes / (double)GM_GIB,
                 (double)-f->headroom_low_bytes / (double)GM_GIB);
}
