/* SPDX-License-Identifier: MIT */
/* driver.c - gm_estimate_run(): resolve and check the job, then run the stages in their
 * fixed order (estimate_int.h lists what each one decides), three times: the point
 * estimate, then the low and the high end of the range, where every uncertain assumption
 * (est_uncertain()) takes its low or high value.  fit.c turns the three into the range and
 * the three-way verdict (fits, borderline, does not fit); the point estimate is what it is,
 * and its verdict is the one searches and suggestions use. */
#include "estimate/estimate_int.h"

#include "base/big.h"
#include "gpumem/arena.h"

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

/* One run at 'bound' into 'out'; the replays it runs are kept in (and answered from) the
 * store 'shared', the point estimate's, which the ends of its range share. */
static enum gm_status run_once(const struct gm_job *j, enum est_bound bound,
                               struct gm_estimate *out, struct gm_est_store *shared,
                               enum est_reads reads, gm_est_segment_fn trace, void *trace_ctx,
                               est_request_fn req_trace, void *req_ctx, struct gm_error *err)
{
    struct est_ctx cx;
    enum gm_status st;
    est_reset(out);
    out->mode = j->mode;
    memset(&cx, 0, sizeof(cx));
    cx.job = j;
    cx.m = j->model.model;
    cx.e = out;
    cx.bound = bound;
    cx.trace = trace;
    cx.trace_ctx = trace_ctx;
    cx.req_trace = req_trace;
    cx.req_trace_ctx = req_ctx;
    cx.replays = &shared->replays;
    cx.loads = &shared->loads;
    cx.reads = reads;
    for (size_t i = 0; i < sizeof(stages) / sizeof(stages[0]); i++)
        if ((st = stages[i](&cx, err)) != GM_OK)
            return st;
    if (out->store->nomem)
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "out of memory (estimate assumptions)");
    return GM_OK;
}

/* The point estimate, then (when everything is read) the two ends of the range and the verdict over
 * it. */
static enum gm_status run_traced(const struct gm_job *job, struct gm_estimate *out,
                                 enum est_reads reads, gm_est_segment_fn fn, void *ctx,
                                 est_request_fn req_fn, void *req_ctx, struct gm_error *err)
{
    struct gm_job j = *job;
    struct gm_est_store *store = out->store;
    enum gm_status st;

    est_reset(out);
    est_job_resolve(&j);
    out->mode = j.mode;
    if ((st = gm_job_check(&j, err)) != GM_OK)
        return st;
    if ((st = run_once(&j, EST_POINT, out, store, reads, fn, ctx, req_fn, req_ctx, err)) != GM_OK ||
        reads != EST_READS_ALL)
        return st;
    for (size_t k = 0; k < 2; k++)
        if (!store->ends[k] && !(store->ends[k] = est_new()))
            return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "out of memory");
    /* the ends run the same stages on the same job: they fail only where the point does */
    if ((st = run_once(&j, EST_LOW, store->ends[0], store, EST_READS_ALL, NULL, NULL, NULL, NULL,
                       err)) == GM_OK &&
        (st = run_once(&j, EST_HIGH, store->ends[1], store, EST_READS_ALL, NULL, NULL, NULL, NULL,
                       err)) == GM_OK)
        est_judge_range(out, store->ends[0], store->ends[1]);
    return st;
}

enum gm_status est_rerun(const struct gm_job *job, struct gm_estimate *e, struct gm_error *err)
{
    return run_traced(job, e, EST_READS_ALL, NULL, NULL, NULL, NULL, err);
}

enum gm_status est_run_point(const struct gm_job *job, struct gm_estimate *e, struct gm_error *err)
{
    return run_traced(job, e, EST_READS_FIGURES, NULL, NULL, NULL, NULL, err);
}

enum gm_status est_run_verdict(const struct gm_job *job, struct gm_estimate *e,
                               struct gm_error *err)
{
    return run_traced(job, e, EST_READS_VERDICT, NULL, NULL, NULL, NULL, err);
}

enum gm_status gm_estimate_run(const struct gm_job *job, struct gm_estimate **out,
                               struct gm_error *err)
{
    return gm_estimate_run_traced(job, out, NULL, NULL, err);
}

enum gm_status gm_estimate_run_traced(const struct gm_job *job, struct gm_estimate **out,
                                      gm_est_segment_fn fn, void *ctx, struct gm_error *err)
{
    if (!*out && !(*out = est_new()))
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "out of memory");
    return run_traced(job, *out, EST_READS_ALL, fn, ctx, NULL, NULL, err);
}

enum gm_status est_run_requests(const struct gm_job *job, struct gm_estimate **out,
                                est_request_fn fn, void *ctx, struct gm_error *err)
{
    if (!*out && !(*out = est_new()))
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "out of memory");
    return run_traced(job, *out, EST_READS_ALL, NULL, NULL, fn, ctx, err);
}

static void keep_segment(void *ctx, const struct gm_est_replay_segment *seg)
{
    struct gm_est_segments *l = ctx;
    void *v = l->v;
    if (l->nomem)
        return;
    if (!gm_big_grow(&v, &l->cap, l->n + 1, sizeof(*l->v), 256)) {
        l->nomem = true;
        return;
    }
    l->v = v;
    l->v[l->n++] = *seg;
}

enum gm_status gm_estimate_run_segments(const struct gm_job *job, struct gm_estimate **out,
                                        struct gm_est_segments *segs, struct gm_error *err)
{
    enum gm_status st;
    memset(segs, 0, sizeof(*segs));
    if ((st = gm_estimate_run_traced(job, out, keep_segment, segs, err)) != GM_OK)
        return st;
    if (segs->nomem)
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "out of memory (replay segments)");
    return GM_OK;
}

void gm_est_segments_free(struct gm_est_segments *segs)
{
    gm_big_free(segs->v, segs->cap * sizeof(*segs->v));
    memset(segs, 0, sizeof(*segs));
}
