/* SPDX-License-Identifier: MIT */
/* search.c - the largest batch, context (training: seq) or vLLM max_model_len at which the
 * job fits: doubling from the smallest value until the fit verdict says no, then bisection
 * between the last fit and the first miss.  The verdict is the one of fit.c, so a search
 * and a plain estimate never disagree about what fits. */
#include "estimate/estimate_int.h"

#include "gpumem/arena.h"

#include <stdio.h>
#include <string.h>

void est_search_job(const struct gm_job *job, enum gm_search what, uint64_t v, struct gm_job *t)
{
    *t = *job;
    t->search = GM_SEARCH_NONE;
    switch (what) {
    case GM_SEARCH_BATCH:
        t->workload.batch = v;
        break;
    case GM_SEARCH_CONTEXT:
        if (job->mode == GM_EST_TRAIN) {
            t->workload.seq = v;
        } else {
            t->workload.context = v;
            if (job->engine.kind == GM_ENGINE_VLLM)
                t->engine.vllm.max_model_len = v + job->workload.new_tokens;
        }
        break;
    case GM_SEARCH_MAX_MODEL_LEN:
        t->engine.vllm.max_model_len = v;
        break;
    case GM_SEARCH_NONE:
        break;
    }
}

/* The point estimate at 'v' into 'out' (its verdict is the one a search goes by); a value
 * that does not fit leaves its verdict in 'res' (the one just past the answer is the last of
 * them: what binds), unless only the verdict is read ('verdict': est_run_verdict()). */
static enum gm_status fits_at(const struct gm_job *job, enum gm_search what, uint64_t v,
                              bool verdict, struct gm_estimate *out, bool *fits,
                              struct gm_est_search *res, struct gm_error *err)
{
    struct gm_job t;
    enum gm_status st;
    est_search_job(job, what, v, &t);
    if ((st = verdict ? est_run_verdict(&t, out, err) : est_run_point(&t, out, err)) != GM_OK)
        return st;
    *fits = out->fit.fits;
    if (!*fits && !verdict) {
        res->limited_by = out->fit.reason;
        snprintf(res->limit_text, sizeof res->limit_text, "%s", out->fit.text);
    }
    return GM_OK;
}

enum gm_status est_search(const struct gm_job *job, enum gm_search what, struct gm_est_search *res,
                          struct gm_estimate *e, bool shown, struct gm_error *err)
{
    uint64_t lo = 0, first = 1, hi, limit = job->search_limit ? job->search_limit : (1u << 20);
    const struct gm_model *m = job->model.model;
    bool fits = false, hit = false;
    enum gm_status st;
    struct gm_job t;

    memset(res, 0, sizeof(*res));
    res->what = what;
    if (!job->gpu.memory_bytes)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "--max-batch / --max-context need a GPU: give --gpu or --gpu-memory");
    /* A length beyond the longest the engine serves the model at (vLLM's stretches the
     * positions by rope_scaling) is not a useful answer: one limit for both searches. */
    uint64_t positions = est_engine_max_len(job, m);
    if ((what == GM_SEARCH_CONTEXT || what == GM_SEARCH_MAX_MODEL_LEN) && positions &&
        positions < limit) {
        limit = positions;
        if (what == GM_SEARCH_CONTEXT && job->mode == GM_EST_INFER &&
            limit > job->workload.new_tokens)
            limit -= job->workload.new_tokens;
    }
    /* max_model_len must hold the request itself */
    if (what == GM_SEARCH_MAX_MODEL_LEN) {
        first = job->workload.context + job->workload.new_tokens;
        if (first < 1)
            first = 1;
        if (first > limit)
            limit = first;
    }
    res->limit = limit;
    hi = first;
    for (;;) {
        if ((st = fits_at(job, what, hi, !shown, e, &fits, res, err)) != GM_OK)
            return st;
        if (!fits)
            break;
        lo = hi;
        if (hi >= limit) {
            hit = true;
            break;
        }
        hi = hi * 2 > limit ? limit : hi * 2;
    }
    if (!hit && lo) {
        while (hi - lo > 1) {
            uint64_t mid = lo + (hi - lo) / 2;
            if ((st = fits_at(job, what, mid, !shown, e, &fits, res, err)) != GM_OK)
                return st;
            if (fits)
                lo = mid;
            else
                hi = mid;
        }
    }
    /* what binds is the verdict at hi, the last value that did not fit (lo + 1, or the
     * least value) */
    res->value = lo;
    res->shown = lo ? lo : first;
    res->hit_limit = hit;
    if (!shown)
        return GM_OK;
    /* the estimate shown, with its range and the verdict over it */
    est_search_job(job, what, res->shown, &t);
    return est_rerun(&t, e, err);
}

enum gm_status gm_estimate_search(const struct gm_job *job, enum gm_search what,
                                  struct gm_est_search *res, struct gm_estimate **out,
                                  struct gm_error *err)
{
    struct gm_estimate *e = out && *out ? *out : est_new();
    enum gm_status st;
    if (!e) {
        memset(res, 0, sizeof(*res));
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "out of memory");
    }
    if (out)
        *out = e;
    st = est_search(job, what, res, e, true, err);
    if (!out)
        gm_estimate_free(e);
    return st;
}
