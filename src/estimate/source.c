/* SPDX-License-Identifier: MIT */
/* source.c - MODEL as the user names it, resolved offline in this order:
 *   1. a path: a config.json (or a folder holding one), or weight files read from their
 *      headers (a safetensors file, shards or their index, a GGUF file; a lone file without
 *      a config.json is sized from its header alone);
 *   2. a Hugging Face id ("org/name[@revision]") in the local hub cache: the snapshot's
 *      config.json and the safetensors / GGUF headers beside it, as huggingface-cli
 *      download leaves them (src/model/hub.c);
 *   3. the built-in catalog by name, Hub id and alias, and the models that share an entry's
 *      architecture (instruct and chat variants, Llama-3.3-70B);
 *   4. else an error that says what was looked at, the command that fetches the config,
 *      and the catalog name the spelling is likely a slip for.
 * How the model was found is kept as a sentence (src->origin) when it is not the name
 * itself; the estimate states it as an assumption.  The job borrows what a struct
 * gm_job_source holds. */
#include "estimate/estimate_int.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

static enum gm_status load_files(struct gm_job_source *src, const char *path, struct gm_error *err)
{
    enum gm_status st;
    if ((st = gm_modelfile_load(path, NULL, &src->files, err)) != GM_OK)
        return st;
    src->has_files = true;
    if ((st = gm_modelfile_to_model(&src->files, &src->model, err)) != GM_OK) {
        gm_job_source_release(src);
        return st;
    }
    return GM_OK;
}

/* A path that exists: weight files, or a config.json (or a folder holding one). */
static enum gm_status load_path(struct gm_job_source *src, const char *spec, struct gm_error *err)
{
    enum gm_status st;
    if (gm_modelfile_is_weights(spec))
        st = load_files(src, spec, err);
    else
        st = gm_model_load_hf_config(spec, &src->model, err);
    if (st == GM_OK)
        gm_model_name_from_path(&src->model, spec);
    return st;
}

/* What an engine loads for a path: a folder as it is, a GGUF file as it is (llama.cpp and
 * vLLM take one), the folder of a config.json or safetensors file (engines load folders). */
static void path_ref(struct gm_job_source *src, const char *spec)
{
    struct stat sb;
    const char *slash = strrchr(spec, '/');
    size_t n = strlen(spec);
    if (stat(spec, &sb) != 0 || !S_ISREG(sb.st_mode) || (n > 5 && !strcmp(spec + n - 5, ".gguf")))
        snprintf(src->ref, sizeof src->ref, "%s", spec);
    else if (!slash)
        snprintf(src->ref, sizeof src->ref, ".");
    else
        snprintf(src->ref, sizeof src->ref, "%.*s", slash == spec ? 1 : (int)(slash - spec), spec);
}

/* 'id' from the hub cache: GM_ERR_NOENT when the cache has no copy of it. */
static enum gm_status load_cached(struct gm_job_source *src, const char *spec,
                                  const struct gm_hf_id *id, const char *cache,
                                  struct gm_error *err)
{
    char dir[4096], commit[41];
    enum gm_status st = gm_hf_hub_snapshot(cache, id, dir, sizeof dir, commit, err);
    if (st != GM_OK)
        return st;
    if ((st = load_path(src, dir, err)) != GM_OK)
        return gm_error_prefix(err, "'%s' in the Hugging Face cache", spec);
    snprintf(src->model.name, sizeof src->model.name, "%.*s", (int)sizeof src->model.name - 1,
             id->name);
    snprintf(src->ref, sizeof src->ref, "%s", spec);
    snprintf(src->origin, sizeof src->origin,
             "model: %.48s%s%.48s from the Hugging Face cache (snapshot %.12s%s)", id->org,
             id->org[0] ? "/" : "", id->name, commit,
             src->has_files ? ", weight files read from their headers" : ", config.json");
    return GM_OK;
}

static bool looks_like_file(const char *spec)
{
    return strstr(spec, ".json") || strstr(spec, ".safetensors") || strstr(spec, ".gguf");
}

enum gm_status gm_job_source_load(struct gm_job_source *src, const char *spec,
                                  const char *hub_cache, struct gm_error *err)
{
    struct stat sb;
    struct gm_hf_id id;
    const struct gm_model *m;
    const char *near;
    size_t idx = 0;
    bool kin = false, is_id;
    char hint[200] = "";

    memset(src, 0, sizeof(*src));
    gm_model_init(&src->model);
    gm_modelfile_init(&src->files);
    if (!spec || !*spec)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "empty model name");
    snprintf(src->ref, sizeof src->ref, "%s", spec);
    if (stat(spec, &sb) == 0 || looks_like_file(spec)) {
        path_ref(src, spec);
        return load_path(src, spec, err);
    }
    /* an id with an organisation may be in the hub cache */
    is_id = gm_hf_id_parse(spec, &id) && id.org[0];
    if (is_id && hub_cache) {
        enum gm_status st = load_cached(src, spec, &id, hub_cache, err);
        if (st != GM_ERR_NOENT)
            return st;
        gm_model_init(&src->model);
    }
    if ((m = gm_model_catalog_match(is_id && id.revision[0] ? id.name : spec, &idx, &kin))) {
        src->model = *m;
        if (!is_id && !kin) /* a catalog name: the engine loads its Hub id */
            snprintf(src->ref, sizeof src->ref, "%s", gm_model_catalog_hub_id(idx));
        if (kin || is_id)
            snprintf(src->origin, sizeof src->origin, "model: '%s'%s%s the built-in %s%s", spec,
                     is_id && hub_cache ? " is not in the Hugging Face cache:" : "",
                     kin ? " sized as" : "", m->name, kin ? " (the same architecture)" : "");
        return GM_OK;
    }
    if ((near = gm_model_catalog_closest(spec)))
        snprintf(hint, sizeof hint, "; did you mean '%s'?", near);
    if (is_id)
        return gm_fail(err, GM_ERR_NOENT, GM_NO_OFFSET,
                       "'%s': not in the Hugging Face cache (%s) and not a built-in model%s "
                       "(fetch its config with: huggingface-cli download %s%s%s config.json; "
                       "built-in models: gpumem estimate --list-models)",
                       spec, hub_cache ? hub_cache : "none found", hint, id.org, "/", id.name);
    return gm_fail(err, GM_ERR_NOENT, GM_NO_OFFSET,
                   "'%s': not a built-in model and no such file%s (see 'gpumem estimate "
                   "--list-models')",
                   spec, hint);
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
    job->model.origin = src->origin[0] ? src->origin : NULL;
    job->model.ref = src->ref[0] ? src->ref : NULL;
}
