/* SPDX-License-Identifier: MIT */
/* driver.c - gm_estimate_run(): resolve and check the job, then run the stages in their
 * fixed order (estimate_int.h lists what each one decides). */
#include "estimate/estimate_int.h"

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

enum gm_status gm_estimate_run(const struct gm_job *job, struct gm_estimate *out,
                               struct gm_error *err)
{
    struct gm_job j = *job;
    struct est_ctx cx;
    enum gm_status st;

    memset(out, 0, sizeof(*out));
    est_job_resolve(&j);
    out->mode = j.mode;
    if ((st = gm_job_check(&j, err)) != GM_OK)
        return st;
    memset(&cx, 0, sizeof(cx));
    cx.job = &j;
    cx.m = j.model.model;
    cx.e = out;
    for (size_t i = 0; i < sizeof(stages) / sizeof(stages[0]); i++)
        if ((st = stages[i](&cx, err)) != GM_OK)
            return st;
    return GM_OK;
}
