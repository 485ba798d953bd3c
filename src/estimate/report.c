/* SPDX-License-Identifier: MIT */
/* report.c - everything `gpumem estimate` answers for one job: the search it asks for
 * (--max-batch, --max-context), the pipeline's estimate at the value found, DeepSpeed's
 * own estimator beside it (--method deepspeed), and when a GPU is given and the job does
 * not fit, the suggestions; without a GPU, the catalog GPUs it fits on. */
#include "estimate/estimate_int.h"

#include "gpumem/arena.h"

#include <string.h>

/* DeepSpeed's table for the job: the parameters and largest layer the model stage found
 * ('e'), over the job's nodes. */
static enum gm_status deepspeed_table(const struct gm_job *j, const struct gm_estimate *e,
                                      struct gm_deepspeed *ds, struct gm_error *err)
{
    uint64_t gpus = j->parallel.gpus, gpn;
    enum gm_status st;

    gpn = j->parallel.gpus_per_node ? j->parallel.gpus_per_node : (gpus < 8 ? gpus : 8);
    if (gpus % gpn != 0)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "--gpus %llu is not a whole number of nodes of %llu GPUs",
                       (unsigned long long)gpus, (unsigned long long)gpn);
    if (j->parallel.shard == GM_SHARD_ZERO3 && !e->largest_layer_params)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "ZeRO-3 needs the largest layer: give a MODEL or --largest-layer N");
    st = gm_deepspeed_estimate((int)j->parallel.shard, e->n_params, e->largest_layer_params, gpn,
                               gpus / gpn, 1.5, ds, err);
    if (st == GM_OK)
        gm_zero_paper_model_states(ds->total_params, ds->gpus_per_node * ds->nodes, 12,
                                   ds->zero_paper);
    return st;
}

/* Without an architecture, DeepSpeed's table stands alone over a weights-only base. */
static void weights_only(const struct gm_job *j, struct gm_job *w)
{
    gm_job_init(w);
    w->model = j->model; /* --parameters and --largest-layer */
    w->runtime = j->runtime;
    w->gpu = j->gpu;
}

/* For a serving job that fits: the engine's command line, and for vLLM and SGLang how many
 * requests the pool serves at once, by request length (1024, 2048, ... up to max_model_len,
 * or to the last length one request fits: SGLang starts with a token pool shorter than its
 * context length and cuts longer inputs to the pool). */
static enum gm_status serving_plan(const struct gm_job *j, struct gm_estimate_report *r,
                                   struct gm_error *err)
{
    char plan[2048];
    uint64_t max = r->est->serving.max_model_len;
    size_t n = 0;
    enum gm_status st;
    if (j->mode != GM_EST_INFER || !r->est->fit.fits)
        return GM_OK;
    if ((st = gm_estimate_plan(j, r->est, plan, sizeof plan, err)) != GM_OK || !plan[0])
        return st;
    if (!(r->plan = gm_malloc(strlen(plan) + 1)))
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "out of memory");
    memcpy(r->plan, plan, strlen(plan) + 1);
    if (j->engine.kind != GM_ENGINE_VLLM && j->engine.kind != GM_ENGINE_SGLANG)
        return GM_OK;
    if (!(r->budget = gm_calloc(32, sizeof(*r->budget))))
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "out of memory");
    for (uint64_t len = 1024; n < 31; len *= 2) {
        uint64_t reqs;
        if (len >= max)
            len = max;
        if (!(reqs = est_engine_sequences(j, r->est, len)))
            break;
        r->budget[n].tokens = len;
        r->budget[n++].requests = reqs;
        if (len >= max)
            break;
    }
    r->n_budget = n;
    return GM_OK;
}

static enum gm_status report_run(const struct gm_job *job, struct gm_estimate_report *r,
                                 struct gm_error *err)
{
    struct gm_job run;
    enum gm_status st;

    r->job = *job;
    est_job_resolve(&r->job);
    if ((st = gm_job_check(&r->job, err)) != GM_OK)
        return st;
    run = r->job;
    if (r->job.method == GM_METHOD_DEEPSPEED && !r->job.model.model) {
        r->deepspeed_only = true;
        weights_only(&r->job, &run);
    }
    if (run.search != GM_SEARCH_NONE) {
        st = gm_estimate_search(&run, run.search, &r->search, &r->est, err);
        if (st != GM_OK)
            return st;
        r->searched = true;
        est_search_job(&r->job, run.search, r->search.shown, &r->job);
        est_search_job(&run, run.search, r->search.shown, &run);
    } else if ((st = gm_estimate_run(&run, &r->est, err)) != GM_OK) {
        return st;
    }
    if (r->job.method == GM_METHOD_DEEPSPEED) {
        if ((st = deepspeed_table(&r->job, r->est, &r->deepspeed, err)) != GM_OK)
            return st;
        r->has_deepspeed = true;
    }
    if (run.gpu.memory_bytes) {
        if (!r->est->fit.fits && !r->deepspeed_only)
            return gm_estimate_suggest(&run, r->est, &r->suggestions, err);
        return serving_plan(&run, r, err);
    }
    {
        size_t idx[GM_EST_MAX_CATALOG], n = est_gpus_by_size(idx, GM_EST_MAX_CATALOG);
        if (!(r->fits_on = gm_calloc(n ? n : 1, sizeof(*r->fits_on))))
            return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "out of memory");
        for (size_t i = 0; i < n; i++) {
            struct gm_est_fit fit;
            est_judge(&run, r->est, gm_gpu_catalog_get(idx[i])->memory_bytes, &fit);
            if (fit.fits)
                r->fits_on[r->n_fits_on++] = idx[i];
        }
    }
    return GM_OK;
}

enum gm_status gm_estimate_report_run(const struct gm_job *job, struct gm_estimate_report **out,
                                      struct gm_error *err)
{
    if (!(*out = gm_calloc(1, sizeof(**out))))
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "out of memory");
    return report_run(job, *out, err);
}

void gm_estimate_report_free(struct gm_estimate_report *r)
{
    if (!r)
        return;
    gm_estimate_free(r->est);
    gm_est_suggestions_release(&r->suggestions);
    gm_free(r->fits_on);
    gm_free(r->plan);
    gm_free(r->budget);
    gm_free(r);
}
