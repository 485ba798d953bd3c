/* SPDX-License-Identifier: MIT */
/* source.c - MODEL as the user names it: a built-in name, a config.json (or a folder
 * holding one), or weight files read from their headers (safetensors, GGUF).  The job
 * borrows what a struct gm_job_source holds. */
#include "estimate/estimate_int.h"

#include <string.h>

enum gm_status gm_job_source_load(struct gm_job_source *src, const char *spec, struct gm_error *err)
{
    enum gm_status st;
    memset(src, 0, sizeof(*src));
    gm_model_init(&src->model);
    gm_modelfile_init(&src->files);
    if (!spec || !gm_modelfile_is_weights(spec))
        return gm_model_resolve(spec, &src->model, err);
    if ((st = gm_modelfile_load(spec, NULL, &src->files, err)) != GM_OK)
        return st;
    src->has_files = true;
    if ((st = gm_modelfile_to_model(&src->files, &src->model, err)) != GM_OK) {
        gm_job_source_release(src);
        return st;
    }
    gm_model_name_from_path(&src->model, spec);
    return GM_OK;
}

void gm_job_source_release(struct gm_job_source *src)
{
    if (!src)
        return;
    gm_modelfile_release(&src->files);
    src->has_files = false;
}

void gm_job_use_source(struct gm_job *job, const struct gm_job_source *src)
{
    job->model.model = &src->model;
    job->model.files = src->has_files ? &src->files : NULL;
}
