/* SPDX-License-Identifier: MIT */
/* driver.c - gm_estimate_run(): resolve and check the job, then run the stages in their
 * fixed order (estimate_int.h lists what each one decides), three times: the point
 * estimate, then the low and the high end of the range, where every uncertain assumption
 * (est_uncertain()) takes its low or high value.  The ranges give the three-way verdict
 * (fits, borderline, does not fit); the point estimate is what it is, and its verdict is
 * the one searches and suggestions use. */
#include "estimate/estimate_int.h"

#include "gpumem/arena.h"

#include <stdio.h>
#include <string.h>

/* The order is the pipeline: each stage sees what the ones above it decided. */
static const est_stage_fn stages[] = {
    est_stage_model,    /* model and weights */
    est_stage_train,    /* training, or */
    est_stage_infer,    /* inference */
    est_stage_adapters, /* LoRA / QLoRA */
    est_stage_parallel, /* data / tensor parallel, ZeRO / FSDP, offload */
    est_stage_pipeline, /* pipeline stages */
    est_stage_engine,   /* serving engine */
    est_stage_runtime,  /* runtime overheads and the three figures */
    est_stage_fit,      /* the verdict */
};

double est_uncertain(struct est_ctx *cx, unsigned source, bool known, double point, double low,
                     double high)
{
    if (known || (low == point && high == point))
        return point;
    cx->e->range.sources |= source;
    return cx->bound == EST_LOW ? low : cx->bound == EST_HIGH ? high : point;
}

static enum gm_status run_once(const struct gm_job *j, enum est_bound bound,
                               struct gm_estimate *out, struct gm_error *err)
{
    struct est_ctx cx;
    enum gm_status st;
    memset(out, 0, sizeof(*out));
    out->mode = j->mode;
    memset(&cx, 0, sizeof(cx));
    cx.job = j;
    cx.m = j->model.model;
    cx.e = out;
    cx.bound = bound;
    for (size_t i = 0; i < sizeof(stages) / sizeof(stages[0]); i++)
        if ((st = stages[i](&cx, err)) != GM_OK)
            return st;
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

/* The range from the two ends, and the verdict over it. */
static void fill_range(struct gm_estimate *e, const struct gm_estimate *lo,
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
    if (f->fits && lo->fit.fits && hi->fit.fits)
        f->verdict = GM_VERDICT_FITS;
    else if (!f->fits && !lo->fit.fits && !hi->fit.fits)
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

enum gm_status gm_estimate_run(const struct gm_job *job, struct gm_estimate *out,
                               struct gm_error *err)
{
    struct gm_job j = *job;
    struct gm_estimate *ends;
    enum gm_status st;

    memset(out, 0, sizeof(*out));
    est_job_resolve(&j);
    out->mode = j.mode;
    if ((st = gm_job_check(&j, err)) != GM_OK)
        return st;
    if ((st = run_once(&j, EST_POINT, out, err)) != GM_OK)
        return st;
    ends = gm_malloc(2 * sizeof(*ends));
    if (!ends)
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "out of memory");
    /* the ends run the same stages on the same job: they fail only where the point does */
    if ((st = run_once(&j, EST_LOW, &ends[0], err)) == GM_OK &&
        (st = run_once(&j, EST_HIGH, &ends[1], err)) == GM_OK)
        fill_range(out, &ends[0], &ends[1]);
    gm_free(ends);
    return st;
}
