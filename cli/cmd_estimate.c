/* SPDX-License-Identifier: MIT */
/* cmd_estimate.c - gpumem estimate: will this training or inference job fit on my GPU,
 * and what would make it fit?  The options are the library's job settings
 * (gm_job_settings()); the command loads MODEL, runs gm_estimate_report_run() and
 * renders the report. */
#include "cli.h"
#include "commands.h"
#include "estimate_render.h"
#include "job_opts.h"
#include "opts.h"

#include "gpumem/estimate.h"
#include "gpumem/model.h"
#include "gpumem/units.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Whether 'needle' is in 'hay', ASCII letters without case. */
static bool contains_nocase(const char *hay, const char *needle)
{
    size_t n = strlen(needle);
    for (; *hay; hay++)
        if (!strncasecmp(hay, needle, n))
            return true;
    return n == 0;
}

/* Whether 'filter' (NULL: everything) is in the name or the Hub id. */
static bool model_matches(const char *filter, const char *name, const char *hub_id)
{
    return !filter || contains_nocase(name, filter) || (hub_id && contains_nocase(hub_id, filter));
}

static int list_models(const char *filter, bool json)
{
    struct gm_json w;
    size_t shown = 0;
    if (json) {
        cli_json_begin(&w, stdout, "estimate.models");
        gm_json_key(&w, "models");
        gm_json_begin_array(&w);
    } else {
        printf("%-26s %-36s %16s\n", "name", "hub id", "parameters");
    }
    for (size_t i = 0; i < gm_model_catalog_count(); i++) {
        struct gm_param_counts pc;
        struct gm_error err;
        const struct gm_model *m = gm_model_catalog_get(i);
        if (!model_matches(filter, m->name, gm_model_catalog_hub_id(i)))
            continue;
        shown++;
        if (gm_model_count_params(m, &pc, &err) != GM_OK)
            return cli_fail("gpumem estimate", &err);
        if (json) {
            gm_json_begin_object(&w);
            gm_json_kv_str(&w, "name", m->name);
            gm_json_kv_str(&w, "hub_id", gm_model_catalog_hub_id(i));
            gm_json_kv_u64(&w, "parameters", pc.total);
            gm_json_end_object(&w);
        } else {
            printf("%-26s %-36s %16llu\n", m->name, gm_model_catalog_hub_id(i),
                   (unsigned long long)pc.total);
        }
    }
    if (!json && !shown && filter) {
        const char *near = gm_model_catalog_closest(filter);
        cli_errorf("gpumem estimate", "no built-in model matches '%s'%s%s%s", filter,
                   near ? " (did you mean '" : "", near ? near : "", near ? "'?)" : "");
        return 1;
    }
    if (!json)
        return 0;
    gm_json_end_array(&w);
    return cli_json_end(&w, "gpumem estimate");
}

/* The model_type names gm_model_parse_hf_config() knows. */
static int list_archs(bool json)
{
    struct gm_json w;
    if (json) {
        cli_json_begin(&w, stdout, "estimate.archs");
        gm_json_key(&w, "archs");
        gm_json_begin_array(&w);
    }
    for (int a = GM_ARCH_UNKNOWN + 1; a < GM_ARCH__COUNT; a++) {
        if (json)
            gm_json_str(&w, gm_arch_name((enum gm_arch)a));
        else
            printf("%s\n", gm_arch_name((enum gm_arch)a));
    }
    if (!json)
        return 0;
    gm_json_end_array(&w);
    return cli_json_end(&w, "gpumem estimate");
}

static int list_gpus(bool json)
{
    struct gm_json w;
    if (json) {
        cli_json_begin(&w, stdout, "estimate.gpus");
        gm_json_key(&w, "gpus");
        gm_json_begin_array(&w);
    } else {
        printf("%-14s %-12s %10s %10s\n", "name", "kind", "MiB", "GiB");
    }
    for (size_t i = 0; i < gm_gpu_catalog_count(); i++) {
        const struct gm_gpu *g = gm_gpu_catalog_get(i);
        if (json) {
            gm_json_begin_object(&w);
            gm_json_kv_str(&w, "name", g->name);
            gm_json_kv_str(&w, "kind", g->kind);
            gm_json_kv_u64(&w, "memory_bytes", g->memory_bytes);
            gm_json_end_object(&w);
        } else {
            printf("%-14s %-12s %10llu %10.2f\n", g->name, g->kind,
                   (unsigned long long)(g->memory_bytes / GM_MIB),
                   (double)g->memory_bytes / (double)GM_GIB);
        }
    }
    if (!json)
        return 0;
    gm_json_end_array(&w);
    return cli_json_end(&w, "gpumem estimate");
}

static void segments_json(const struct gm_est_segments *l, const struct gm_estimate *e,
                          struct gm_json *w)
{
    cli_json_begin(w, stdout, "estimate.replay_segments");
    gm_json_key(w, "segments");
    gm_json_begin_array(w);
    for (size_t i = 0; i < l->n; i++) {
        const struct gm_est_replay_segment *seg = &l->v[i];
        gm_json_begin_object(w);
        gm_json_kv_u64(w, "pass", seg->pass);
        gm_json_kv_u64(w, "step", seg->step);
        gm_json_kv_str(w, "at", gm_est_replay_at_name(seg->at));
        gm_json_kv_u64(w, "layer", seg->layer);
        gm_json_kv_str(w, "stream", gm_est_stream_name(seg->stream));
        gm_json_kv_u64(w, "bytes", seg->bytes);
        gm_json_kv_u64(w, "request_bytes", seg->request);
        gm_json_kv_u64(w, "live_bytes", seg->live);
        gm_json_kv_u64(w, "reserved_bytes", seg->reserved);
        gm_json_end_object(w);
    }
    gm_json_end_array(w);
    gm_json_kv_u64(w, "steps", e->replay.steps);
    gm_json_kv_u64(w, "reserved_peak_bytes", e->replay.reserved_peak);
}

static void segments_text(const struct gm_est_segments *l, const struct gm_estimate *e)
{
    char b[32], q[32], lv[32], rs[32], where[48];
    uint64_t total = 0;
    if (!e->replay.steps) {
        printf("no step replay for this job (its peak reserved does not come from a replayed "
               "training step)\n");
        return;
    }
    printf("pass step  at             stream              segment      request         live     "
           "reserved\n");
    for (size_t i = 0; i < l->n; i++) {
        const struct gm_est_replay_segment *seg = &l->v[i];
        total += seg->bytes;
        if (seg->layer)
            snprintf(where, sizeof where, "%s %u", gm_est_replay_at_name(seg->at), seg->layer);
        else
            snprintf(where, sizeof where, "%s", gm_est_replay_at_name(seg->at));
        printf("%4u %4u  %-14s %-14s %12s %12s %12s %12s\n", seg->pass, seg->step, where,
               gm_est_stream_name(seg->stream),
               gm_format_bytes(b, sizeof b, seg->bytes, GM_UNITS_IEC),
               gm_format_bytes(q, sizeof q, seg->request, GM_UNITS_IEC),
               gm_format_bytes(lv, sizeof lv, seg->live, GM_UNITS_IEC),
               gm_format_bytes(rs, sizeof rs, seg->reserved, GM_UNITS_IEC));
    }
    printf("%zu segments, %s, in %llu replayed steps; replay peak reserved %s\n", l->n,
           gm_format_bytes(b, sizeof b, total, GM_UNITS_IEC), (unsigned long long)e->replay.steps,
           gm_format_bytes(rs, sizeof rs, e->replay.reserved_peak, GM_UNITS_IEC));
}

/* The estimate's step replay, segment by segment, in the order it took them. */
static int replay_segments(const char *cmd, const struct gm_job *job, bool json)
{
    struct gm_estimate *e = NULL;
    struct gm_est_segments l;
    struct gm_json w;
    struct gm_error err;
    int rc;
    if (gm_estimate_run_segments(job, &e, &l, &err) != GM_OK) {
        rc = cli_fail(cmd, &err);
    } else if (json) {
        segments_json(&l, e, &w);
        rc = cli_json_end(&w, "gpumem estimate");
    } else {
        segments_text(&l, e);
        rc = fflush(stdout) != 0 ? GM_EXIT_IOERR : 0;
    }
    gm_est_segments_free(&l);
    gm_estimate_free(e);
    return rc;
}

/* One option per job setting, then the command's own. */
static void build_options(struct opt *opts, struct job_opts *c, bool *list_m, bool *list_g,
                          bool *list_a, bool *segs, bool *json, int *color)
{
    size_t n = 0;
    job_opts_add(opts, &n, c);
    opts[n++] = (struct opt)OPT_FLAG("list-models", 0, list_m,
                                     "list the built-in models (MODEL: those whose name or Hub "
                                     "id holds it)");
    opts[n++] = (struct opt)OPT_FLAG("list-gpus", 0, list_g, "list the GPU catalog");
    opts[n++] = (struct opt)OPT_FLAG("list-archs", 0, list_a,
                                     "list the architectures (model_type) gpumem knows");
    opts[n++] = (struct opt)OPT_FLAG("replay-segments", 0, segs,
                                     "list the segments the step replay takes, in order, with "
                                     "where in the step and what was live (training)");
    opts[n++] = (struct opt)OPT_JSON(json, "gpumem.estimate/1");
    opts[n++] = (struct opt)OPT_COLOR(color);
    opts[n] = (struct opt)OPT_END;
}

static const struct opt_usage usage = {
    "gpumem estimate [MODEL] [--train|--infer] [OPTIONS]",
    "Predict peak GPU memory before launching: peak allocated, peak reserved and\n"
    "device used as nvidia-smi shows it, with every component and assumption, the\n"
    "fit verdict on a GPU and what to change when it does not fit.\n"
    "MODEL is a built-in name (--list-models), a config.json or a directory holding\n"
    "one, or weight files read from their headers: a .safetensors file, a folder of\n"
    "shards or its model.safetensors.index.json, or a .gguf file.\n"
    "Without --train or --infer only the weights are sized.",
    "  gpumem estimate --parameters 7B --bits 16 --reserve-gib 4\n"
    "  gpumem estimate llama-3-8b --train --batch 4 --seq 2048 --gpu H100\n"
    "  gpumem estimate qwen2.5-1.5b --train --method blog --precision fp32 --batch 16 --seq 256\n"
    "  gpumem estimate mistral-7b --infer --batch 8 --context 8192 --kv-dtype fp8\n"
    "  gpumem estimate llama-3.1-70b --infer --engine vllm --tp 2 --gpu \"NVIDIA H100 80GB HBM3\"\n"
    "  gpumem estimate model.gguf --infer --engine llama.cpp --context 8192 --gpu RTX-4090"};

int cmd_estimate(int argc, char **argv)
{
    const char *cmd = argv[0];
    struct job_opts c;
    struct opt opts[JOB_OPTS_MAX + 8];
    struct gm_job job;
    struct gm_job_source src;
    struct gm_estimate_report *r = NULL;
    struct gm_error err;
    bool json = false, list_m = false, list_g = false, list_a = false, have_src = false;
    bool segs = false;
    int color = 0, n_pos = 0, rc;

    build_options(opts, &c, &list_m, &list_g, &list_a, &segs, &json, &color);
    if ((rc = opts_parse_cmd(argc, argv, opts, &usage, false, &n_pos)) >= 0)
        return rc;
    if (list_m)
        return list_models(n_pos == 1 ? argv[1] : NULL, json);
    if (list_g)
        return list_gpus(json);
    if (list_a)
        return list_archs(json);
    if (n_pos > 1)
        return cli_usage(cmd, "unexpected argument '%s'", argv[2]);
    gm_job_init(&job);
    if ((rc = job_opts_fill(cmd, &c, &job)) != 0)
        return rc;
    if (n_pos == 0 && !job.model.n_params)
        return cli_usage(cmd, "give a MODEL or --parameters N");
    if (n_pos == 1) {
        char cache[4096];
        bool have_cache = gm_hf_hub_cache(getenv, cache, sizeof cache);
        if (gm_job_source_load(&src, argv[1], have_cache ? cache : NULL, &err) != GM_OK)
            return cli_fail(cmd, &err);
        have_src = true;
        gm_job_use_source(&job, &src);
    }
    if (segs) {
        rc = replay_segments(cmd, &job, json);
        goto out;
    }
    if (gm_estimate_report_run(&job, &r, &err) != GM_OK) {
        rc = cli_fail(cmd, &err);
    } else if (json) {
        rc = gm_estimate_report_json(stdout, r, &err) == GM_OK ? 0 : cli_fail(cmd, &err);
    } else {
        est_render_text(stdout, r, cli_use_color((enum cli_color)color, stdout));
        rc = fflush(stdout) != 0 ? GM_EXIT_IOERR : 0;
    }
    gm_estimate_report_free(r);
out:
    if (have_src)
        gm_job_source_release(&src);
    return rc;
}
